// The walk-through of docs/api.md through the generated TypeScript client,
// against the server at SHOP_URL, signing up SHOP_EMAIL, or else a fresh
// account, so that it can run again on the same server. Run twice by
// TestGeneratedTypeScriptClientWalkThrough (tests/tsclient_test.go), which
// starts the server and counts what this wrote.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { problemOf, shopClient } from "../src/client.js";

const baseUrl = process.env.SHOP_URL;
const email = process.env.SHOP_EMAIL || `walk-through-${randomUUID()}@example.com`;

test("walk-through", async () => {
  assert.ok(baseUrl, "SHOP_URL names the server, such as http://localhost:8080");
  const anon = shopClient(baseUrl);
  const credentials = { email, password: "correct horse" };
  const user = await anon.POST("/api/v1/users", { body: credentials });
  assert.ok(
    user.data,
    `signing up ${email}: ${user.response.status} ${user.error ? problemOf(user.error, user.response).type : ""}` +
      (user.response.status === 409 ? "; that account exists on this server already: leave SHOP_EMAIL out for a fresh one" : ""),
  );
  assert.equal(user.data?.email, email);
  const token = await anon.POST("/api/v1/tokens", { body: credentials });
  assert.ok(token.data, `token: ${token.response.status}`);
  assert.equal(token.response.headers.get("Cache-Control"), "no-store");

  const c = shopClient(baseUrl, token.data.token);
  const catalog = await c.GET("/api/v1/products");
  const [first, second] = catalog.data?.products ?? [];
  assert.ok(first && second, "the catalog has two products");

  const orderKey = randomUUID();
  const place = (key: string, productId: string, quantity: number) =>
    c.POST("/api/v1/orders", {
      params: { header: { "Idempotency-Key": key } },
      body: { items: [{ product_id: productId, quantity }] },
    });
  const placed = await place(orderKey, first.id, 2);
  assert.ok(placed.data, `order: ${placed.response.status}`);
  assert.equal(placed.response.headers.get("Location"), `/api/v1/orders/${placed.data.id}`);
  assert.equal(placed.response.headers.get("Idempotent-Replayed"), null);

  const replay = await place(orderKey, first.id, 2);
  assert.equal(replay.response.headers.get("Idempotent-Replayed"), "true");
  assert.equal(replay.data?.id, placed.data.id);

  const reused = await place(orderKey, first.id, 3);
  const mismatch = problemOf(reused.error, reused.response);
  assert.equal(reused.response.status, 422);
  assert.deepEqual([mismatch.status, mismatch.type], [422, "/problems/idempotency-key-reused"]);

  const unknown = await place(randomUUID(), randomUUID(), 1);
  const invalid = problemOf(unknown.error, unknown.response);
  assert.equal(invalid.type, "/problems/validation");
  assert.equal(invalid.errors?.[0]?.field, "items[0].product_id");

  const later = await place(randomUUID(), second.id, 1);
  assert.ok(later.data, `second order: ${later.response.status}`);

  const pageOne = await c.GET("/api/v1/orders", { params: { query: { limit: 1 } } });
  assert.deepEqual(pageOne.data?.orders.map((o) => o.id), [later.data.id]);
  const after = pageOne.data?.next_cursor;
  assert.ok(after, "page one has a next cursor");
  const pageTwo = await c.GET("/api/v1/orders", { params: { query: { limit: 1, after } } });
  assert.deepEqual(pageTwo.data?.orders.map((o) => o.id), [placed.data.id]);
  assert.equal(pageTwo.data?.next_cursor, null);

  const pay = (id: string, method: "pm_card_visa" | "pm_card_declined") =>
    c.POST("/api/v1/orders/{id}/payments", {
      params: { path: { id }, header: { "Idempotency-Key": randomUUID() } },
      body: { payment_method: method },
    });
  const paid = await pay(placed.data.id, "pm_card_visa");
  assert.equal(paid.data?.status, "succeeded");
  assert.equal(paid.data?.amount_cents, placed.data.total_cents);
  const declined = await pay(later.data.id, "pm_card_declined");
  const refusal = problemOf(declined.error, declined.response);
  assert.deepEqual([refusal.status, refusal.type, refusal.payment?.status], [402, "/problems/payment-declined", "declined"]);

  const missing = await c.GET("/api/v1/orders/{id}", { params: { path: { id: randomUUID() } } });
  assert.equal(problemOf(missing.error, missing.response).type, "/problems/not-found");
  const order = await c.GET("/api/v1/orders/{id}", { params: { path: { id: placed.data.id } } });
  assert.equal(order.data?.status, "paid");
  assert.equal(order.data?.payments.length, 1);
});
