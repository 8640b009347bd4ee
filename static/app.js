// Small enhancements; every page works without them, and the server is the
// guarantee that a form sent twice is done once.

// Disables a form's submit buttons while it is submitting, so a double-click
// sends one request.
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (event.defaultPrevented) return;
  form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (button) {
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    if (button.dataset.busy) button.textContent = button.dataset.busy;
  });
});
// A page restored by the back button must not keep its buttons disabled.
window.addEventListener("pageshow", function () {
  document.querySelectorAll("button[aria-busy=true]").forEach(function (button) {
    button.disabled = false;
    button.removeAttribute("aria-busy");
    if (button.dataset.label) button.textContent = button.dataset.label;
  });
});

// Times in the shopper's own time zone; the page prints them in UTC.
document.addEventListener("DOMContentLoaded", function () {
  var format = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  var dayFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });
  document.querySelectorAll("time[datetime]").forEach(function (time) {
    var date = new Date(time.dateTime);
    if (!isNaN(date)) time.textContent = (time.hasAttribute("data-day") ? dayFormat : format).format(date);
  });
});

// A running total on the catalog form. Only a guide: the order page shows
// the total the server computed.
document.addEventListener("DOMContentLoaded", function () {
  var form = document.querySelector("form.catalog");
  var total = form && form.querySelector(".total");
  if (!total) return;
  var inputs = form.querySelectorAll("input[data-price-cents]");
  var update = function () {
    var cents = 0, currency = "USD";
    inputs.forEach(function (input) {
      var quantity = Number(input.value);
      currency = input.dataset.currency;
      if (Number.isInteger(quantity) && quantity > 0) cents += quantity * Number(input.dataset.priceCents);
    });
    total.querySelector("output").textContent =
      new Intl.NumberFormat(undefined, { style: "currency", currency: currency }).format(cents / 100);
  };
  form.addEventListener("input", update);
  update();
  total.hidden = false;
});
