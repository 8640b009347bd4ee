// A web app on another origin than the API's, run in Chromium by
// tests/cors_browser_test.go: the page loads this module, which calls the
// API at ?api= through the generated client, signs up ?email= (or uses
// ?token=), places one order of ?product= with an Idempotency-Key, sends
// it again with the same key, and leaves what it could read in
// window.report. The browser lets it read the answers only if the API
// allows this page's origin (CORS_ORIGINS).
import { shopClient } from "../src/client.js";

/** What the page saw of one answer: only what CORS lets a script read. */
export type Seen = { status: number; replayed: string | null; location: string | null; requestId: string | null };

/** The page's report: the step it reached, and why it stopped there. */
export type Report = { step: string; error?: string; orderId?: string; replayId?: string; answers?: Seen[] };

declare global {
  interface Window {
    report?: Report;
  }
}

const seen = (r: Response): Seen => ({
  status: r.status,
  replayed: r.headers.get("Idempotent-Replayed"),
  location: r.headers.get("Location"),
  requestId: r.headers.get("X-Request-Id"),
});

async function walk(params: URLSearchParams, progress: (step: string) => void): Promise<Report> {
  const api = params.get("api") ?? "";
  let token = params.get("token");
  const email = params.get("email");
  if (email !== null) {
    const anon = shopClient(api);
    const credentials = { email, password: "correct horse" };
    progress("sign-up");
    const user = await anon.POST("/api/v1/users", { body: credentials });
    if (!user.data) return { step: "sign-up", error: `answered ${user.response.status}` };
    progress("token");
    const issued = await anon.POST("/api/v1/tokens", { body: credentials });
    if (!issued.data) return { step: "token", error: `answered ${issued.response.status}` };
    token = issued.data.token;
  }
  const c = shopClient(api, token ?? undefined);
  const key = crypto.randomUUID();
  const place = () =>
    c.POST("/api/v1/orders", {
      params: { header: { "Idempotency-Key": key } },
      body: { items: [{ product_id: params.get("product") ?? "", quantity: 1 }] },
    });
  progress("order");
  const first = await place();
  progress("replay");
  const again = await place();
  return { step: "done", orderId: first.data?.id, replayId: again.data?.id, answers: [seen(first.response), seen(again.response)] };
}

let step = "start";
walk(new URLSearchParams(location.search), (s) => (step = s)).then(
  (report) => (window.report = report),
  (err: unknown) => (window.report = { step, error: String(err) }),
);
