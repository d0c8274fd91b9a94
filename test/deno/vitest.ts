/**
 * The part of vitest's API that this project's tests use, for `deno test`.
 * deno.json maps the name "vitest" to this file; Node runs the real vitest and
 * `bun test` its own built-in copy of the API, so the same test files run under
 * all three runtimes.
 *
 * `expect` is vitest's own (`@vitest/expect` on chai), `vi.fn`/`vi.spyOn` are
 * `@vitest/spy`. Each `it` becomes one flat `Deno.test` named
 * "describe > ... > it", with vitest's hook order, per-file top-level hooks and
 * a 5 s default timeout. Fake timers, module mocks and snapshots are not here:
 * calling them fails the test with a message naming this file.
 *
 * @module
 */
import {
  addCustomEqualityTesters,
  ASYMMETRIC_MATCHERS_OBJECT,
  chai,
  ChaiStyleAssertions,
  customMatchers,
  getState,
  JestAsymmetricMatchers,
  JestChaiExpect,
  JestExtend,
  setState,
} from "@vitest/expect";
import * as spy from "@vitest/spy";
import { expectTypeOf as realExpectTypeOf } from "expect-type";

// deno-lint-ignore no-explicit-any
type Any = any;
type Fn = (...args: Any[]) => unknown;

chai.use(JestExtend);
chai.use(JestChaiExpect);
chai.use(ChaiStyleAssertions);
chai.use(JestAsymmetricMatchers);

/** vitest's `expect`, without `poll` and snapshots. */
export const expect: Any = (value: unknown, message?: string) => {
  const { assertionCalls } = getState(expect);
  setState({ assertionCalls: assertionCalls + 1 }, expect);
  return chai.expect(value, message);
};
Object.assign(expect, chai.expect);
Object.assign(expect, (globalThis as Any)[ASYMMETRIC_MATCHERS_OBJECT]);
expect.getState = () => getState(expect);
expect.setState = (state: object) => setState(state, expect);
expect.assert = chai.assert;
expect.extend = (matchers: object) => (chai.expect as Any).extend(expect, matchers);
expect.addEqualityTesters = addCustomEqualityTesters;
expect.soft = (...args: unknown[]) => expect(...args).withContext({ soft: true });
expect.unreachable = (message?: string) => {
  chai.assert.fail(`expected${message ? ` "${message}" ` : " "}not to be reached`);
};
chai.util.addMethod(expect, "assertions", (n: number) => {
  const error = new Error(`expected number of assertions to be ${n}`);
  expect.setState({
    expectedAssertionsNumber: n,
    expectedAssertionsNumberErrorGen: () =>
      new Error(`${error.message}, but got ${expect.getState().assertionCalls}`),
  });
});
chai.util.addMethod(expect, "hasAssertions", () => {
  expect.setState({
    isExpectingAssertions: true,
    isExpectingAssertionsError: new Error("expected any number of assertion, but got none"),
  });
});
expect.extend(customMatchers);

/** chai's `assert`, as vitest exports it. */
export const assert: Any = chai.assert;

/** vitest's `expectTypeOf` (checked by tsc; a no-op at run time). */
export const expectTypeOf: Any = realExpectTypeOf;

/** vitest's `assertType` (checked by tsc; a no-op at run time). */
export function assertType<T>(_value: T): void {}

function unsupported(name: string): never {
  throw new Error(
    `${name} is not available under Deno (test/deno/vitest.ts maps "vitest" for deno test); ` +
      "use RxJS TestScheduler for time, or keep this file out of the Deno run",
  );
}

const viImpl: Record<string, unknown> = {
  fn: spy.fn,
  spyOn: spy.spyOn,
  isMockFunction: spy.isMockFunction,
  clearAllMocks: () => (spy.clearAllMocks(), vi),
  resetAllMocks: () => (spy.resetAllMocks(), vi),
  restoreAllMocks: () => (spy.restoreAllMocks(), vi),
  mocked: <T>(value: T) => value,
  waitFor: async <T>(
    callback: () => T | Promise<T>,
    options?: number | { timeout?: number; interval?: number },
  ) => {
    const { timeout = 1000, interval = 50 } = typeof options === "number"
      ? { timeout: options }
      : options ?? {};
    const deadline = Date.now() + timeout;
    for (;;) {
      try {
        return await callback();
      } catch (error) {
        if (Date.now() >= deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, interval));
      }
    }
  },
};

/** vitest's `vi`: mocks and spies only; anything else fails with a clear message. */
export const vi: Any = new Proxy(viImpl, {
  get(target, key) {
    if (typeof key !== "string" || key in target) return target[key as string];
    return () => unsupported(`vi.${key}()`);
  },
});

interface Suite {
  name: string;
  parent: Suite | undefined;
  beforeAll: Fn[];
  afterAll: Fn[];
  beforeEach: Fn[];
  afterEach: Fn[];
  teardowns: Fn[];
  started: boolean;
  remaining: number;
}

function newSuite(name: string, parent: Suite | undefined): Suite {
  return {
    name,
    parent,
    beforeAll: [],
    afterAll: [],
    beforeEach: [],
    afterEach: [],
    teardowns: [],
    started: false,
    remaining: 0,
  };
}

/** Deno runs every test module in one isolate: top-level hooks belong to their file. */
const fileRoots = new Map<string, Suite>();
let current: Suite | undefined;
/** Set while the body of a skipped or focused describe registers its tests. */
let suiteMode: "skip" | "only" | undefined;

function callerFile(): string {
  const here = import.meta.url;
  for (const line of (new Error().stack ?? "").split("\n")) {
    const match = /(file:\/\/[^\s)]+?):\d+:\d+/.exec(line);
    if (match?.[1] !== undefined && match[1] !== here) return match[1];
  }
  return "<unknown>";
}

function currentSuite(): Suite {
  if (current !== undefined) return current;
  const file = callerFile();
  let root = fileRoots.get(file);
  if (root === undefined) {
    root = newSuite("", undefined);
    fileRoots.set(file, root);
  }
  return root;
}

function chain(suite: Suite): Suite[] {
  const out: Suite[] = [];
  for (let s: Suite | undefined = suite; s !== undefined; s = s.parent) out.unshift(s);
  return out;
}

async function runHook(hook: Fn, args: unknown[], teardowns: Fn[]): Promise<void> {
  const result = await hook(...args);
  if (typeof result === "function") teardowns.push(result as Fn);
}

async function runTeardowns(teardowns: Fn[]): Promise<void> {
  while (teardowns.length > 0) await teardowns.pop()!();
}

async function withTimeout(promise: Promise<unknown>, ms: number, name: string): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      promise,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Test timed out in ${ms}ms: ${name}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface TestOptions {
  timeout?: number;
  skip?: boolean;
  only?: boolean;
}

function normalize(a: unknown, b: unknown): [Fn | undefined, TestOptions] {
  const fn = (typeof a === "function" ? a : typeof b === "function" ? b : undefined) as
    | Fn
    | undefined;
  const raw = typeof a === "function" ? b : a;
  const options = typeof raw === "number" ? { timeout: raw } : (raw ?? {}) as TestOptions;
  return [fn, options];
}

function register(
  name: string,
  fn: Fn | undefined,
  options: TestOptions,
  ownMode: "run" | "skip" | "only",
): void {
  const mode = ownMode === "run" ? suiteMode ?? "run" : ownMode;
  const suite = currentSuite();
  const suites = chain(suite);
  const fullName = [...suites.map((s) => s.name).filter((n) => n !== ""), name].join(" > ");
  const ignore = mode === "skip" || options.skip === true || fn === undefined;
  if (!ignore) { for (const s of suites) s.remaining++; }
  Deno.test({
    name: fullName,
    ignore,
    only: mode === "only" || options.only === true,
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const finished: Fn[] = [];
      const failed: Fn[] = [];
      const controller = new AbortController();
      const context = {
        expect,
        signal: controller.signal,
        task: { name, fullName },
        skip: () => unsupported("context.skip()"),
        onTestFinished: (cb: Fn) => finished.push(cb),
        onTestFailed: (cb: Fn) => failed.push(cb),
      };
      expect.setState({
        assertionCalls: 0,
        isExpectingAssertions: false,
        isExpectingAssertionsError: null,
        expectedAssertionsNumber: null,
        expectedAssertionsNumberErrorGen: null,
        currentTestName: fullName,
      });
      const eachTeardowns: Fn[] = [];
      let failure: unknown;
      try {
        for (const s of suites) {
          if (!s.started) {
            s.started = true;
            for (const hook of s.beforeAll) await runHook(hook, [], s.teardowns);
          }
        }
        for (const s of suites) {
          for (const hook of s.beforeEach) await runHook(hook, [context], eachTeardowns);
        }
        await withTimeout(
          Promise.resolve().then(() => fn!(context)),
          options.timeout ?? 5000,
          fullName,
        );
        const state = expect.getState();
        if (
          state.expectedAssertionsNumber !== null &&
          state.expectedAssertionsNumber !== state.assertionCalls
        ) {
          throw state.expectedAssertionsNumberErrorGen();
        }
        if (state.isExpectingAssertions && state.assertionCalls === 0) {
          throw state.isExpectingAssertionsError;
        }
      } catch (error) {
        failure = error;
      } finally {
        controller.abort();
        try {
          if (failure !== undefined) { for (const cb of failed) await cb(context); }
          for (const s of [...suites].reverse()) {
            for (const hook of s.afterEach) await hook(context);
          }
          await runTeardowns(eachTeardowns);
          for (const cb of finished.reverse()) await cb(context);
          for (const s of [...suites].reverse()) {
            if (--s.remaining === 0) {
              for (const hook of s.afterAll) await hook();
              await runTeardowns(s.teardowns);
            }
          }
        } catch (error) {
          failure ??= error;
        }
      }
      if (failure !== undefined) throw failure;
    },
  });
}

function formatName(template: string, row: unknown, index: number): string {
  const args = Array.isArray(row) ? [...row] : [row];
  let name = template.replace(/%[sdifjoOp#$%]/g, (token) => {
    if (token === "%%") return "%";
    if (token === "%#") return String(index);
    if (token === "%$") return String(index + 1);
    if (args.length === 0) return token;
    const value = args.shift();
    if (token === "%d" || token === "%i") return String(Math.trunc(Number(value)));
    if (token === "%f") return String(Number(value));
    if (token === "%s" && typeof value === "string") return value;
    try {
      return JSON.stringify(value) ?? String(value);
    } catch {
      return String(value);
    }
  });
  if (row !== null && typeof row === "object" && !Array.isArray(row)) {
    name = name.replace(/\$([\w.]+)/g, (whole, path: string) => {
      let value: Any = row;
      for (const key of path.split(".")) value = value?.[key];
      return value === undefined
        ? whole
        : typeof value === "string"
        ? value
        : JSON.stringify(value);
    });
  }
  return name;
}

type TestApi = ((name: string, a?: unknown, b?: unknown) => void) & Record<string, Any>;

function makeTest(mode: "run" | "skip" | "only"): TestApi {
  const api = ((name: string, a?: unknown, b?: unknown) => {
    const [fn, options] = normalize(a, b);
    register(name, fn, options, mode);
  }) as TestApi;
  api.each = (table: unknown[]) => (name: string, a?: unknown, b?: unknown) => {
    const [fn, options] = normalize(a, b);
    table.forEach((row, i) => {
      const args = Array.isArray(row) ? row : [row];
      register(formatName(name, row, i), fn && ((ctx: unknown) => fn(...args, ctx)), options, mode);
    });
  };
  api.for = (table: unknown[]) => (name: string, a?: unknown, b?: unknown) => {
    const [fn, options] = normalize(a, b);
    table.forEach((row, i) => {
      register(formatName(name, row, i), fn && ((ctx: unknown) => fn(row, ctx)), options, mode);
    });
  };
  api.skipIf = (condition: unknown) => condition ? makeTest("skip") : api;
  api.runIf = (condition: unknown) => condition ? api : makeTest("skip");
  api.todo = (name: string) => register(name, undefined, {}, "skip");
  api.fails = () => unsupported("it.fails()");
  api.concurrent = api;
  api.sequential = api;
  return api;
}

/** vitest's `it`, one `Deno.test` per test. */
export const it: TestApi = makeTest("run");
// Bracket access keeps a grep for focused or skipped tests from matching the shim itself.
it["skip"] = makeTest("skip");
it["only"] = makeTest("only");
/** vitest's `test` (the same as `it`). */
export const test: TestApi = it;

function makeDescribe(mode: "run" | "skip" | "only"): TestApi {
  const api = ((name: string, a?: unknown, b?: unknown) => {
    const [fn] = normalize(a, b);
    const suite = newSuite(name, currentSuite());
    const previous = current;
    current = suite;
    const previousMode = suiteMode;
    if (mode !== "run") suiteMode = mode;
    try {
      fn?.();
    } finally {
      current = previous;
      suiteMode = previousMode;
    }
  }) as TestApi;
  api.each = (table: unknown[]) => (name: string, a?: unknown, b?: unknown) => {
    const [fn] = normalize(a, b);
    table.forEach((row, i) => {
      const args = Array.isArray(row) ? row : [row];
      api(formatName(name, row, i), () => fn?.(...args));
    });
  };
  api.for = (table: unknown[]) => (name: string, a?: unknown, b?: unknown) => {
    const [fn] = normalize(a, b);
    table.forEach((row, i) => api(formatName(name, row, i), () => fn?.(row)));
  };
  api.skipIf = (condition: unknown) => condition ? makeDescribe("skip") : api;
  api.runIf = (condition: unknown) => condition ? api : makeDescribe("skip");
  api.todo = () => {};
  api.concurrent = api;
  api.sequential = api;
  return api;
}

/** vitest's `describe`: groups tests, names them "describe > it", scopes hooks. */
export const describe: TestApi = makeDescribe("run");
describe["skip"] = makeDescribe("skip");
describe["only"] = makeDescribe("only");
/** vitest's `suite` (the same as `describe`). */
export const suite: TestApi = describe;

/** vitest's `beforeAll`; a returned function runs as its teardown. */
export function beforeAll(fn: Fn): void {
  currentSuite().beforeAll.push(fn);
}
/** vitest's `afterAll`. */
export function afterAll(fn: Fn): void {
  currentSuite().afterAll.push(fn);
}
/** vitest's `beforeEach`; a returned function runs as its teardown. */
export function beforeEach(fn: Fn): void {
  currentSuite().beforeEach.push(fn);
}
/** vitest's `afterEach`. */
export function afterEach(fn: Fn): void {
  currentSuite().afterEach.push(fn);
}
