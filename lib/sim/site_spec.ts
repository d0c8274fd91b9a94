/**
 * Simulated sites as a user writes them on the command line
 * (`politely simulate --site "bucket rate=10 burst=3 status=429 latency=50ms"`)
 * or in a JSON file: a limiter shape, its parameters, and how the site
 * answers. Parsed into the zoo's `ZooSiteSpec` (lib/sim/zoo.ts) plus the host
 * the site serves and its share of the URLs.
 *
 * @module
 */
import { type LimiterSpec, validateZooSpec, type ZooSiteSpec } from "./zoo.ts";

/** A simulated site: a zoo site, the host it answers for, and its share of the workload. */
export interface SimulatedSiteSpec extends ZooSiteSpec {
  /** Host (and port) of its URLs, e.g. `api.example.com`. */
  readonly host: string;
  /** Its share of the URLs, relative to the other sites'. @default 1 */
  readonly weight?: number;
}

/** A site spec that cannot mean anything; the message names the field. */
export class SiteSpecError extends Error {
  override readonly name = "SiteSpecError";
}

const SHAPES = ["bucket", "spacer", "fixed", "sliding", "conc", "shed", "none"] as const;
type ShapeWord = (typeof SHAPES)[number];

/** The keys each shape takes, besides the common ones. */
const SHAPE_KEYS: Readonly<Record<ShapeWord, readonly string[]>> = {
  bucket: ["rate", "burst"],
  spacer: ["rate"],
  fixed: ["quota", "window"],
  sliding: ["quota", "window"],
  conc: ["max"],
  shed: ["workers", "queue"],
  none: [],
};
const COMMON_KEYS = [
  "host",
  "name",
  "weight",
  "latency",
  "status",
  "retry-after",
  "announce",
  "announce-on",
] as const;

/**
 * A duration: `50ms`, `1.5s`, `2m`, or a bare number of milliseconds.
 *
 * @throws {SiteSpecError} naming `field` when it is not one.
 */
export function parseDuration(field: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (m === null) {
    throw new SiteSpecError(
      `'${field}' expects a duration like 50ms or 1.5s: current value is '${text}'`,
    );
  }
  const n = Number(m[1]);
  return m[2] === "s" ? n * 1000 : m[2] === "m" ? n * 60_000 : n;
}

function positive(field: string, text: string, integer: boolean): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new SiteSpecError(
      `'${field}' expects ${
        integer ? "a whole number" : "a number"
      } > 0: current value is '${text}'`,
    );
  }
  return n;
}

function retryAfterOf(text: string): "none" | "seconds" | "date" | number {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  if (t === "none" || t === "seconds" || t === "date") return t;
  throw new SiteSpecError(
    `'retry-after' expects one of none, seconds, date or a whole number of seconds: current value is '${text}'`,
  );
}

function oneOf<T extends string>(field: string, text: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(text)) return text as T;
  throw new SiteSpecError(
    `'${field}' expects one of ${allowed.join(", ")}: current value is '${text}'`,
  );
}

/**
 * Parses one site spec: a shape word, then `key=value` pairs.
 *
 * Shapes: `bucket rate=R burst=B` (token bucket, burst 1 by default),
 * `spacer rate=R` (a bucket of burst 1), `fixed quota=Q window=W`,
 * `sliding quota=Q window=W`, `conc max=N` (N served at once),
 * `shed workers=N queue=Q` (a backend that queues then sheds), `none`.
 * Common keys: `host=` (default `site-N.test`), `name=`, `weight=`,
 * `latency=` (default 50ms), `status=429|503`, `retry-after=none|seconds|date|N`
 * (N: always `Retry-After: N`),
 * `announce=none|ietf|legacy|x-epoch|x-delta`, `announce-on=all|refusals`.
 *
 * @param text The spec.
 * @param index Its position (1-based), for the default host and name.
 * @returns The site.
 * @throws {SiteSpecError} With one line naming the field that is wrong.
 * @example
 * ```ts
 * import { parseSiteSpec } from "./site_spec.ts";
 * const s = parseSiteSpec("bucket rate=10 burst=3 status=429 latency=50ms host=api.test");
 * console.assert(s.host === "api.test" && s.latencyMs === 50);
 * ```
 */
export function parseSiteSpec(text: string, index = 1): SimulatedSiteSpec {
  const words = text.trim().split(/\s+/).filter((w) => w !== "");
  const shapeWord = words.shift();
  if (shapeWord === undefined) {
    throw new SiteSpecError(
      `a site spec starts with its shape (${SHAPES.join(", ")}): it is empty`,
    );
  }
  const shape = oneOf("shape", shapeWord, SHAPES);
  const values = new Map<string, string>();
  for (const w of words) {
    const eq = w.indexOf("=");
    if (eq <= 0) throw new SiteSpecError(`'${w}' in site ${index} is not key=value`);
    const key = w.slice(0, eq).toLowerCase();
    if (!SHAPE_KEYS[shape].includes(key) && !(COMMON_KEYS as readonly string[]).includes(key)) {
      throw new SiteSpecError(
        `'${key}' is not a key of a ${shape} site: it takes ${
          [...SHAPE_KEYS[shape], ...COMMON_KEYS].join(", ")
        }`,
      );
    }
    values.set(key, w.slice(eq + 1));
  }
  const need = (key: string): string => {
    const v = values.get(key);
    if (v === undefined) throw new SiteSpecError(`a ${shape} site needs '${key}='`);
    return v;
  };
  let limiter: LimiterSpec;
  switch (shape) {
    case "bucket":
      limiter = {
        shape: "token-bucket",
        ratePerSec: positive("rate", need("rate"), false),
        burst: values.has("burst") ? positive("burst", values.get("burst")!, true) : 1,
      };
      break;
    case "spacer":
      limiter = {
        shape: "token-bucket",
        ratePerSec: positive("rate", need("rate"), false),
        burst: 1,
      };
      break;
    case "fixed":
    case "sliding":
      limiter = {
        shape: shape === "fixed" ? "fixed-window" : "sliding-window",
        quota: positive("quota", need("quota"), true),
        windowMs: parseDuration("window", need("window")),
      };
      break;
    case "conc":
      limiter = { shape: "concurrency", maxConcurrency: positive("max", need("max"), true) };
      break;
    case "shed":
      limiter = {
        shape: "load-shed",
        workers: positive("workers", need("workers"), true),
        maxQueue: Number(need("queue")),
      };
      break;
    case "none":
      limiter = { shape: "none" };
      break;
  }
  const host = values.get("host") ?? `site-${index}.test`;
  if (!/^[a-z0-9.-]+(:\d+)?$/i.test(host)) {
    throw new SiteSpecError(
      `'host' expects a host name like api.example.com: current value is '${host}'`,
    );
  }
  const site: SimulatedSiteSpec = {
    name: values.get("name") ?? host,
    host: host.toLowerCase(),
    limiter,
    latencyMs: values.has("latency") ? parseDuration("latency", values.get("latency")!) : 50,
    status: values.has("status")
      ? Number(oneOf("status", values.get("status")!, ["429", "503"] as const)) as 429 | 503
      : 429,
    retryAfter: values.has("retry-after") ? retryAfterOf(values.get("retry-after")!) : "none",
    announce: values.has("announce")
      ? oneOf(
        "announce",
        values.get("announce")!,
        ["none", "ietf", "legacy", "x-epoch", "x-delta"] as const,
      )
      : "none",
    ...(values.has("announce-on")
      ? {
        announceOn: oneOf("announce-on", values.get("announce-on")!, ["all", "refusals"] as const),
      }
      : {}),
    ...(values.has("weight") ? { weight: positive("weight", values.get("weight")!, false) } : {}),
  };
  checkSite(site);
  return site;
}

/**
 * Checks a site given as an object (a JSON file): the zoo's own range checks
 * (they name the field), plus `host` and `weight`.
 *
 * @throws {SiteSpecError} naming the field.
 */
export function checkSite(site: SimulatedSiteSpec): void {
  if (typeof site.host !== "string" || site.host === "") {
    throw new SiteSpecError(`site '${site.name}': 'host' must be a host name`);
  }
  if (site.weight !== undefined && !(site.weight > 0)) {
    throw new SiteSpecError(
      `site '${site.host}': 'weight' must be > 0: current value is ${site.weight}`,
    );
  }
  try {
    validateZooSpec(site);
  } catch (error) {
    throw new SiteSpecError(`site '${site.host}': ${(error as Error).message}`);
  }
}
