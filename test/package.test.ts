import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { startRecordingServer } from "./_helpers/loopback_server.ts";
import { runProcess } from "./_helpers/run_process.ts";

// What a user of the npm package gets: the repository is packed as `npm pack`
// packs it (prepack builds dist/), the tarball is installed into a new project
// by npm, and plain Node (no tsx, no loader) imports it and runs its command.
// Everything stays on this machine: the dependencies are packed from this
// repository's node_modules and npm runs --offline with an empty cache of its
// own. Under `bun test` and `deno test` the same steps run (the consumers run
// on plain Node all the same), and the runner's own runtime also imports the
// installed package: Bun through the "bun" condition (the TypeScript source),
// Deno through the compiled dist/.

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = join(ROOT, "node_modules", ".bin");
const isDeno = "Deno" in globalThis;
const isBun = "Bun" in globalThis;
/** Plain Node: this process under vitest, the `node` on PATH under Bun or Deno. */
const NODE = isDeno || isBun ? "node" : process.execPath;
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const TIMEOUT_MS = 180_000;

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment for child processes: no NODE_OPTIONS (so no loader such as
 * tsx is inherited) and none of the npm_* variables `npm run` sets for scripts
 * (a nested npm would read them as its own configuration).
 */
function childEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || key === "NODE_OPTIONS" || /^npm_/i.test(key)) continue;
    env[key] = value;
  }
  env["NO_COLOR"] = "1";
  return env;
}

function run(command: string, args: readonly string[], cwd: string): Promise<Run> {
  return runProcess(command, args, { cwd, env: childEnv() });
}

/** Runs a command that must succeed; its stdout. */
async function ok(command: string, args: readonly string[], cwd: string): Promise<string> {
  const result = await run(command, args, cwd);
  if (result.code !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} exited with ${result.code}\n${result.stderr}${result.stdout}`,
    );
  }
  return result.stdout;
}

interface PackedFile {
  readonly path: string;
}

interface PackResult {
  readonly name: string;
  readonly version: string;
  readonly filename: string;
  readonly files: readonly PackedFile[];
}

interface Installed {
  /** The temporary directory holding everything below (removed after the tests). */
  readonly tmp: string;
  /** The temporary project the tarball was installed into. */
  readonly project: string;
  /** The paths inside the politely tarball. */
  readonly files: readonly string[];
  /** The politely directory inside the project's node_modules. */
  readonly pkg: string;
}

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
}

/** An installed package that the consumer needs. */
interface DependencyDir {
  readonly name: string;
  readonly version: string;
  readonly dir: string;
  /** The package whose own node_modules holds this one (a second version of a hoisted name). */
  readonly nestedIn?: string;
}

/**
 * `names` and everything they depend on, as installed in this repository (a
 * package's own node_modules first, then the hoisted one).
 */
function dependencyClosure(names: readonly string[]): DependencyDir[] {
  const found = new Map<string, DependencyDir>();
  const visit = (name: string, from: string, fromName: string | undefined): void => {
    const nested = join(from, "node_modules", name);
    const isNested = fromName !== undefined && existsSync(join(nested, "package.json"));
    const dir = isNested ? nested : join(ROOT, "node_modules", name);
    if (found.has(dir)) return;
    const manifest = readJson(join(dir, "package.json"));
    const version = String(manifest["version"]);
    found.set(dir, isNested ? { name, version, dir, nestedIn: fromName } : { name, version, dir });
    for (const dep of Object.keys(manifest["dependencies"] ?? {})) visit(dep, dir, name);
  };
  for (const name of names) visit(name, ROOT, undefined);
  return [...found.values()];
}

/** Packs the repository and installs the tarball into a new project, once per file. */
async function installTarball(): Promise<Installed> {
  const tmp = mkdtempSync(join(tmpdir(), "politely-package-"));

  // A copy of what `npm pack` reads, so that building never touches the
  // repository's own dist/ (another run may be using it).
  const manifest = readJson(join(ROOT, "package.json"));
  const source = join(tmp, "source");
  mkdirSync(source);
  const shipped = (manifest["files"] as string[]).filter((f) => f !== "dist");
  for (const entry of [...shipped, "package.json", "tsconfig.json", "tsconfig.build.json"]) {
    cpSync(join(ROOT, entry), join(source, entry), { recursive: true });
  }
  symlinkSync(join(ROOT, "node_modules"), join(source, "node_modules"), "dir");

  const packs = join(tmp, "packs");
  mkdirSync(packs);
  const packed = JSON.parse(
    await ok(NPM, ["pack", "--json", "--pack-destination", packs], source),
  ) as PackResult[];
  const tarball = packed[0];
  if (tarball === undefined) throw new Error("npm pack reported no tarball");

  // The runtime dependencies and the rxjs peer, packed from node_modules.
  const wanted = [
    ...Object.keys(manifest["dependencies"] as Record<string, string>),
    "rxjs",
  ];
  const deps = dependencyClosure(wanted);
  const depPacks = JSON.parse(
    await ok(
      NPM,
      [
        "pack",
        "--json",
        "--ignore-scripts",
        "--pack-destination",
        packs,
        ...deps.map((d) => d.dir),
      ],
      tmp,
    ),
  ) as PackResult[];
  // Hoisted packages are installed as the consumer's own dependencies; a
  // second version nested under the package that needs it (warcio's tempy and
  // crypto-random-string want two majors of type-fest) is given to that
  // package through npm's overrides, since npm --offline cannot fetch it.
  const hoisted: string[] = [];
  const overrides: Record<string, Record<string, string>> = {};
  for (const dep of deps) {
    const pack = depPacks.find((p) => p.name === dep.name && p.version === dep.version);
    if (pack === undefined) throw new Error(`npm pack made no tarball of ${dep.dir}`);
    const tarball = join(packs, pack.filename);
    if (dep.nestedIn === undefined) hoisted.push(tarball);
    else (overrides[dep.nestedIn] ??= {})[dep.name] = `file:${tarball}`;
  }

  const project = join(tmp, "project");
  mkdirSync(project);
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module", overrides }),
  );
  await ok(NPM, [
    "install",
    "--offline",
    "--no-audit",
    "--no-fund",
    "--cache",
    join(tmp, "npm-cache"),
    join(packs, tarball.filename),
    ...hoisted,
  ], project);
  writeFileSync(join(project, "consumer.mjs"), CONSUMER);
  return {
    tmp,
    project,
    files: tarball.files.map((f) => f.path),
    pkg: join(project, "node_modules", "politely"),
  };
}

/** Throttles three requests to the origin given as its argument, prints what it saw. */
const CONSUMER = `
import { from, lastValueFrom, toArray } from "rxjs";
import { createThrottler, throttleByScope } from "politely";

const origin = process.argv[2];
const throttler = createThrottler({ concurrentRequestsPerDomain: 1, downloadDelayMs: 10 });
const outcomes = await lastValueFrom(
  from([1, 2, 3].map((i) => origin + "/page/" + i)).pipe(
    throttleByScope(throttler, async (url, { signal }) => {
      const response = await fetch(url, { signal });
      await response.text();
      return response.status;
    }),
    toArray(),
  ),
);
console.log(JSON.stringify({
  resolved: import.meta.resolve("politely"),
  outcomes: outcomes.map((o) => [o.request.slice(origin.length), o.kind === "response" ? o.response : String(o.error)]),
}));
`;

let installing: Promise<Installed> | undefined;
const installed = (): Promise<Installed> => (installing ??= installTarball());

const servers: { close(): Promise<void> }[] = [];
afterAll(async () => {
  for (const server of servers) await server.close();
  const done = await installing?.catch(() => undefined);
  if (done !== undefined) rmSync(done.tmp, { recursive: true, force: true });
});

/** Runs consumer.mjs with `runtime` against a new loopback server. */
async function consume(runtime: readonly string[]): Promise<{ resolved: string; paths: string[] }> {
  const { project } = await installed();
  const server = await startRecordingServer();
  servers.push(server);
  const [command, ...args] = runtime;
  const out = await ok(command!, [...args, "consumer.mjs", server.origin], project);
  const seen = JSON.parse(out.trim().split("\n").at(-1)!) as {
    resolved: string;
    outcomes: [string, unknown][];
  };
  expect(seen.outcomes).toEqual([["/page/1", 200], ["/page/2", 200], ["/page/3", 200]]);
  return { resolved: seen.resolved, paths: server.arrivals.map((a) => a.path) };
}

describe("the npm package", () => {
  it("npm pack ships dist/ (JavaScript, declarations, source maps) and no tests", async () => {
    const { files } = await installed();
    for (
      const file of [
        "package.json",
        "bin/politely.js",
        "dist/mod.js",
        "dist/mod.d.ts",
        "dist/mod.js.map",
        "dist/lib/cli/main.js",
        "dist/operators/throttle_by_scope.js",
        "mod.ts",
      ]
    ) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => /^(test|bench|examples|dist\/test)\//.test(f))).toEqual([]);
  }, TIMEOUT_MS);

  it("every relative import in the compiled dist/ ends in .js", async () => {
    const { pkg, files } = await installed();
    const specifier =
      /^(?:import|export)\b[^;]*?\bfrom\s*"(\.[^"]*)"|^import\s*"(\.[^"]*)"|\bimport\("(\.[^"]*)"\)/gm;
    const bad: string[] = [];
    let count = 0;
    for (const file of files.filter((f) => f.startsWith("dist/") && f.endsWith(".js"))) {
      for (const match of readFileSync(join(pkg, file), "utf8").matchAll(specifier)) {
        const path = match[1] ?? match[2] ?? match[3] ?? "";
        count += 1;
        if (!path.endsWith(".js")) bad.push(`${file}: ${path}`);
      }
    }
    expect(count).toBeGreaterThan(50);
    expect(bad).toEqual([]);
  }, TIMEOUT_MS);

  it(
    "plain Node imports createThrottler and throttleByScope from the installed package",
    async () => {
      const { resolved, paths } = await consume([NODE]);
      expect(resolved).toMatch(/\/node_modules\/politely\/dist\/mod\.js$/);
      expect(paths).toEqual(["/page/1", "/page/2", "/page/3"]);
    },
    TIMEOUT_MS,
  );

  it("the installed politely command prints the version under plain Node", async () => {
    const { project, pkg } = await installed();
    const version = readJson(join(pkg, "package.json"))["version"];
    expect(version).toBe(readJson(join(ROOT, "package.json"))["version"]);
    const viaBin = await ok(
      NODE,
      [join(project, "node_modules", ".bin", "politely"), "--version"],
      project,
    );
    expect(viaBin.trim()).toBe(version);
    const viaMain = await ok(
      NODE,
      ["node_modules/politely/dist/lib/cli/main.js", "--version"],
      project,
    );
    expect(viaMain.trim()).toBe(version);
  }, TIMEOUT_MS);

  it("a strict TypeScript project type-checks against the installed declarations", async () => {
    const { project } = await installed();
    // @types/node, as a Node project would have it (the package's declarations
    // name node: types). warcio's @types/stream-buffers may have brought it.
    mkdirSync(join(project, "node_modules", "@types"), { recursive: true });
    if (!existsSync(join(project, "node_modules", "@types", "node"))) {
      symlinkSync(
        join(ROOT, "node_modules", "@types", "node"),
        join(project, "node_modules", "@types", "node"),
        "dir",
      );
    }
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
        },
        files: ["typed.ts"],
      }),
    );
    writeFileSync(
      join(project, "typed.ts"),
      [
        'import { createThrottler, type Throttler } from "politely";',
        "const throttler: Throttler<string> = createThrottler<string>({ downloadDelayMs: 10 });",
        "// @ts-expect-error downloadDelayMs is a number",
        'createThrottler({ downloadDelayMs: "10" });',
        "export { throttler };",
        "",
      ].join("\n"),
    );
    const checked = await run(join(BIN, "tsc"), ["-p", "tsconfig.json"], project);
    expect(checked.stdout + checked.stderr).toBe("");
    expect(checked.code).toBe(0);
  }, TIMEOUT_MS);

  it("Bun imports the TypeScript source (the bun condition), Deno the compiled dist/", async () => {
    const underBun = await consume([join(BIN, "bun")]);
    expect(underBun.resolved).toMatch(/\/node_modules\/politely\/mod\.ts$/);
    expect(underBun.paths).toEqual(["/page/1", "/page/2", "/page/3"]);
    const underDeno = await consume([join(BIN, "deno"), "run", "-A"]);
    expect(underDeno.resolved).toMatch(/\/node_modules\/politely\/dist\/mod\.js$/);
    expect(underDeno.paths).toEqual(["/page/1", "/page/2", "/page/3"]);
  }, TIMEOUT_MS);
});

describe("bin/politely.js", () => {
  /**
   * A package laid out at `dir` with this repository's bin/politely.js, an
   * entry point that prints "source" (lib/cli/main.ts) and, with `dist`, one
   * that prints "dist" (dist/lib/cli/main.js); `tsx` links the real tsx where
   * Node finds it from `dir`.
   */
  function layout(dir: string, options: { dist: boolean; tsx: boolean; tsxAt: string }): string {
    mkdirSync(join(dir, "bin"), { recursive: true });
    cpSync(join(ROOT, "bin", "politely.js"), join(dir, "bin", "politely.js"));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    mkdirSync(join(dir, "lib", "cli"), { recursive: true });
    writeFileSync(
      join(dir, "lib", "cli", "main.ts"),
      `const from: string = "source";\nconsole.log(from);\n`,
    );
    if (options.dist) {
      mkdirSync(join(dir, "dist", "lib", "cli"), { recursive: true });
      writeFileSync(join(dir, "dist", "lib", "cli", "main.js"), `console.log("dist");\n`);
    }
    if (options.tsx) {
      mkdirSync(options.tsxAt, { recursive: true });
      // tsx's own dependencies resolve from its real path, in this repository.
      symlinkSync(join(ROOT, "node_modules", "tsx"), join(options.tsxAt, "tsx"), "dir");
    }
    return join(dir, "bin", "politely.js");
  }

  it("bin/politely.js runs the source of a checkout that lies inside a folder named node_modules", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "politely-bin-"));
    try {
      // tmp/node_modules/politely-src is a checkout (no dist/ yet); tsx is found in tmp/node_modules.
      const bin = layout(join(tmp, "node_modules", "politely-src"), {
        dist: false,
        tsx: true,
        tsxAt: join(tmp, "node_modules"),
      });
      expect(await ok(NODE, [bin], tmp)).toBe("source\n");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("bin/politely.js runs dist/ of a package kept outside node_modules where tsx cannot be loaded", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "politely-bin-"));
    try {
      // As in Deno's npm cache or under Yarn Plug'n'Play: no node_modules in the path, no tsx.
      const bin = layout(join(tmp, "cache", "politely", "0.1.0"), {
        dist: true,
        tsx: false,
        tsxAt: "",
      });
      expect(await ok(NODE, [bin], tmp)).toBe("dist\n");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("bin/politely.js runs dist/ when installed and the source in a checkout", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "politely-bin-"));
    try {
      const installedBin = layout(join(tmp, "project", "node_modules", "politely"), {
        dist: true,
        tsx: true,
        tsxAt: join(tmp, "project", "node_modules"),
      });
      expect(await ok(NODE, [installedBin], tmp)).toBe("dist\n");
      const checkoutBin = layout(join(tmp, "checkout"), {
        dist: true,
        tsx: true,
        tsxAt: join(tmp, "checkout", "node_modules"),
      });
      expect(await ok(NODE, [checkoutBin], tmp)).toBe("source\n");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("bin/politely.js says what to do when there is neither dist/ nor tsx", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "politely-bin-"));
    try {
      const bin = layout(join(tmp, "bare"), { dist: false, tsx: false, tsxAt: "" });
      const result = await run(NODE, [bin], tmp);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain("npm run build");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
