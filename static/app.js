// Disables a form's submit buttons while it is submitting, so a double-click
// sends one request. The pages work without it: the server makes a repeated
// submission of the same form land on the same order anyway.
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
