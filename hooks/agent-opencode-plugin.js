// funes: installed by `funes add opencode`; `funes remove opencode` deletes this file.
// It runs funes' agent hook when an OpenCode session goes idle (a turn finished), with the
// event as JSON on stdin, detached, so OpenCode never waits for funes (docs/agents.md).
import { spawn } from "node:child_process";

const HOOK = @HOOK@;

function runHook(event, payload) {
  try {
    const child = spawn(HOOK, ["opencode", event], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
    });
    child.on("error", () => {});
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
    child.unref();
  } catch {
    // a hook never fails the agent
  }
}

export const FunesPlugin = async ({ directory }) => ({
  event: async ({ event }) => {
    if (event?.type === "session.idle") {
      runHook("turn-end", { session_id: event.properties?.sessionID ?? null, cwd: directory });
    }
  },
});
