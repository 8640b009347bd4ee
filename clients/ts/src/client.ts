// The Shop API's TypeScript client: the types are generated from
// openapi/openapi.yaml by openapi-typescript (src/schema.d.ts, `npm run
// generate`), the calls are made by openapi-fetch.
import createClient from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, paths };
export type Problem = components["schemas"]["Problem"];

/** A client for the server at baseUrl, sending token as the bearer token when given. */
export function shopClient(baseUrl: string, token?: string) {
  const headers: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};
  return createClient<paths>({ baseUrl, headers });
}

/**
 * problemOf reads an error answer as the one Problem type. Every error answer
 * of the API is `allOf` the Problem schema and a narrowing of its `type` and
 * `status`, so openapi-fetch's `error` is always assignable to Problem; the
 * media type is checked, because a proxy or a crash may answer otherwise.
 */
export function problemOf(error: Problem | undefined, response: Response): Problem {
  const mediaType = response.headers.get("Content-Type")?.split(";")[0]?.trim();
  if (error === undefined || mediaType !== "application/problem+json") {
    throw new Error(`${response.status} is not a problem document (${mediaType ?? "no Content-Type"})`);
  }
  return error;
}

// tsc --strict fails here if an error answer of any operation is not a
// Problem: the document's promise that errors decode to one type.
type ProblemBodies<Op> = Op extends { responses: infer R }
  ? { [S in keyof R]: R[S] extends { content: { "application/problem+json": infer B } } ? B : never }[keyof R]
  : never;
type EveryErrorBody = { [K in keyof operations]: ProblemBodies<operations[K]> }[keyof operations];
export const everyErrorIsAProblem: [EveryErrorBody] extends [Problem] ? true : never = true;
