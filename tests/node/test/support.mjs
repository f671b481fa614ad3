// Test support for the Node interop tests: a real `gateway serve` child process (own state dir,
// random token, --listen 127.0.0.1:0, the port read from its `listening http://...` line), the
// paths of the pinned client binaries, and cleanup of the brokers and runners a gateway started.
//
// Prerequisites come from the environment (scripts/test sets them); a missing one fails the test
// loudly, it never skips: GATEWAY_BIN (the built gateway), CLAUDE_BIN (the pinned Claude Code).

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const NODE_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
export const BIN_DIR = join(NODE_DIR, 'node_modules', '.bin');

const LISTEN_TIMEOUT_MS = 60_000;

/** An executable path from the environment, or a thrown error naming what is missing. */
export function requiredBinary(name) {
  const path = process.env[name];
  if (!path) {
    throw new Error(`${name} is not set: run the Node tests through scripts/test (or export ${name})`);
  }
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`${name}=${path} is not an executable file`);
  }
  return path;
}

/** A client binary installed by `npm ci` in tests/node. */
export function clientBinary(name) {
  const path = join(BIN_DIR, name);
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`${path} is missing: run \`npm ci\` in tests/node (scripts/test does)`);
  }
  return path;
}

/** A fresh temporary directory (removed by the caller). */
export function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * Starts `gateway serve --listen 127.0.0.1:0` with a fresh state dir and token, with the real
 * Claude Code runner. Resolves once the gateway printed its `listening` line.
 */
export async function startGateway({ extraArgs = [], extraEnv = {} } = {}) {
  const binary = requiredBinary('GATEWAY_BIN');
  const claude = requiredBinary('CLAUDE_BIN');
  const work = tempDir('gw-node-');
  const stateDir = join(work, 'state');
  mkdirSync(stateDir, { mode: 0o700 });
  const token = randomBytes(32).toString('hex');
  const child = spawn(binary, ['serve', '--listen', '127.0.0.1:0', ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      CLAUDE_BIN: claude,
      CLAUDE_TOOLS_STATE_DIR: stateDir,
      CLAUDE_TOOLS_GATEWAY_TOKEN: token,
      ...extraEnv,
    },
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-200_000);
  });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`gateway printed no listening line within ${LISTEN_TIMEOUT_MS} ms\n${stderr}`)),
      LISTEN_TIMEOUT_MS,
    );
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      if (line.startsWith('listening http://')) {
        clearTimeout(timer);
        resolve(line.split(' ')[1].trim());
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (code ${code}, signal ${signal}) before listening\n${stderr}`));
    });
  });
  return {
    url,
    token,
    stateDir,
    work,
    /** The capability URL (token in the path), for clients that cannot send headers. */
    capabilityUrl: `${url}/${token}`,
    stderr: () => stderr,
    /** Stops the gateway, kills the brokers and runners it started, removes its files. */
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timeout = new Promise((resolve) => setTimeout(() => resolve('timeout'), 10_000));
        if ((await Promise.race([exited, timeout])) === 'timeout') {
          child.kill('SIGKILL');
          await exited;
        }
      }
      killSessionProcesses(stateDir);
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/**
 * SIGKILLs every process whose command line names `stateDir` (the brokers and runners of that
 * gateway outlive it by design), so a failed test leaves nothing running.
 */
export function killSessionProcesses(stateDir) {
  let entries;
  try {
    entries = readdirSync('/proc');
  } catch {
    return; // not Linux: nothing to scan
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmdline.includes(stateDir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/** Runs a program to completion; resolves {code, stdout, stderr}. Rejects after `timeoutMs`. */
export function run(program, args, { env = process.env, timeoutMs = 120_000, cwd } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${program} ${args.join(' ')}: no exit within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The JSON document at the start of `text` (the Inspector CLI prints one, pretty). */
export function parseJsonOutput(text, what) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`${what}: output is not JSON (${err.message}):\n${text.slice(0, 4000)}`);
  }
}
