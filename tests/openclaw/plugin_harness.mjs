// A small stand-in for OpenClaw's plugin host, for fast deterministic tests of the
// memvault plugin: it loads the plugin's index.js, calls register() with an `api` that
// records what the plugin registers, runs a script of actions against what was
// registered, and prints one JSON line with the results.
//
// Usage: node plugin_harness.mjs [path/to/index.js] < {"config": {...}, "actions": [...]}
//
// Actions (each answers {ms, result} or {ms, error}):
//   {"do": "tool", "name": "memory_search", "params": {...}}     execute(id, params, signal)
//   {"do": "hook", "name": "before_prompt_build", "event": {...}, "ctx": {...}}
//                                                 typed hook: every handler, in order
//   {"do": "internal", "event": {"type": "command", "action": "reset", "sessionKey": ...}}
//   {"do": "prompt", "tools": ["memory_search", ...]}             promptBuilder
//   {"do": "flush", "params": {"cfg": ..., "nowMs": ..., "contextWindowTokens": ...}}
//   {"do": "cli", "args": ["memvault", "status"]}                 output and exit code
//   {"do": "write", "path": "...", "text": "..."}                 change a file (a token)
//   {"do": "sleep", "ms": 100}
//
// The host's rules it keeps: typed hooks are awaited in registration order;
// internal hooks run for "type:action" or "type"; a handler that throws is an
// error in the results (OpenClaw would log it), which the tests treat as a failure.

import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const entry = process.argv[2] ?? path.join(here, "../../src/memvault/openclaw/plugin/index.js");

const readStdin = async () => {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8").trim();
  return text ? JSON.parse(text) : {};
};

/** A commander-like command tree, enough for registerCli's registrars. */
class Command {
  constructor(name) {
    this.name = name;
    this.children = new Map();
    this.handler = undefined;
    this.about = "";
  }

  command(name) {
    const child = new Command(name.split(" ")[0]);
    this.children.set(child.name, child);
    return child;
  }

  description(text) {
    this.about = text;
    return this;
  }

  option() {
    return this;
  }

  action(handler) {
    this.handler = handler;
    return this;
  }

  find(args) {
    let node = this;
    for (const arg of args) {
      node = node.children.get(arg);
      if (!node) return undefined;
    }
    return node;
  }
}

const script = await readStdin();
const registered = {
  tools: [],
  hooks: [],
  internalHooks: [],
  capability: null,
  cli: [],
};
const tools = new Map();
const typedHooks = [];
const internalHooks = [];
const cliRegistrars = [];
const logs = { debug: [], info: [], warn: [], error: [] };
const logger = Object.fromEntries(
  Object.keys(logs).map((level) => [level, (...parts) => logs[level].push(parts.join(" "))]),
);

const api = {
  id: "memvault",
  name: "memvault",
  pluginConfig: script.config ?? {},
  config: script.hostConfig ?? {},
  logger,
  registerTool(tool, options) {
    const made = typeof tool === "function" ? tool(script.toolContext ?? {}) : tool;
    for (const one of Array.isArray(made) ? made : [made]) {
      tools.set(one.name, one);
      registered.tools.push(one.name);
    }
    if (options?.names) registered.toolNames = options.names;
  },
  registerMemoryCapability(capability) {
    registered.capability = Object.keys(capability).sort();
    api.capability = capability;
  },
  on(name, handler, options) {
    typedHooks.push({ name, handler, options });
    registered.hooks.push(name);
  },
  registerHook(events, handler, options) {
    const list = Array.isArray(events) ? events : [events];
    internalHooks.push({ events: list, handler });
    registered.internalHooks.push({ events: list, name: options?.name, description: options?.description });
  },
  registerCli(registrar, options) {
    cliRegistrars.push(registrar);
    registered.cli.push(...(options?.descriptors ?? []));
  },
};

const clean = (value) => (value === undefined ? null : value);

async function runCli(args) {
  const program = new Command("openclaw");
  for (const registrar of cliRegistrars) {
    await registrar({ program, parentPath: [], config: api.config, logger });
  }
  const command = program.find(args);
  if (!command?.handler) throw new Error(`unknown command: ${args.join(" ")}`);
  const printed = [];
  const original = console.log;
  const exitBefore = process.exitCode;
  console.log = (...parts) => printed.push(parts.join(" "));
  process.exitCode = undefined;
  try {
    await command.handler();
  } finally {
    console.log = original;
  }
  const exitCode = process.exitCode ?? 0;
  process.exitCode = exitBefore;
  return { output: printed.join("\n"), exitCode };
}

async function run(action) {
  switch (action.do) {
    case "tool": {
      const tool = tools.get(action.name);
      if (!tool) throw new Error(`no tool ${action.name}`);
      return tool.execute(`call-${action.name}`, action.params ?? {}, new AbortController().signal);
    }
    case "hook": {
      const results = [];
      for (const hook of typedHooks.filter((h) => h.name === action.name)) {
        results.push(clean(await hook.handler(action.event ?? {}, action.ctx ?? {})));
      }
      return results.length === 1 ? results[0] : results;
    }
    case "internal": {
      const event = {
        context: {},
        messages: [],
        ...action.event,
        timestamp: new Date(),
      };
      const names = [`${event.type}:${event.action}`, event.type];
      let ran = 0;
      for (const hook of internalHooks.filter((h) => h.events.some((e) => names.includes(e)))) {
        await hook.handler(event);
        ran += 1;
      }
      return { ran };
    }
    case "prompt":
      return api.capability.promptBuilder({ availableTools: new Set(action.tools ?? []) });
    case "flush":
      return clean(api.capability.flushPlanResolver(action.params ?? {}));
    case "cli":
      return runCli(action.args ?? []);
    case "write":
      writeFileSync(action.path, action.text);
      return null;
    case "sleep":
      await new Promise((resolve) => setTimeout(resolve, action.ms ?? 0));
      return null;
    default:
      throw new Error(`unknown action ${JSON.stringify(action)}`);
  }
}

const plugin = (await import(pathToFileURL(path.resolve(entry)).href)).default;
const output = { plugin: { id: plugin.id, name: plugin.name }, registered, results: [], logs };
try {
  await plugin.register(api);
} catch (error) {
  output.registerError = String(error?.stack ?? error);
}
for (const action of script.actions ?? []) {
  const started = performance.now();
  try {
    const result = await run(action);
    output.results.push({ ms: Math.round(performance.now() - started), result: clean(result) });
  } catch (error) {
    output.results.push({ ms: Math.round(performance.now() - started), error: String(error?.stack ?? error) });
  }
}
process.stdout.write(`${JSON.stringify(output)}\n`);
// Calls still waiting on a silent socket must not keep the host stand-in alive.
process.exit(0);
