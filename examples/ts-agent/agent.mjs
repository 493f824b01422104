// A forkline agent in plain JavaScript, using only Node's built-in fetch,
// crypto and http: a tool loop against an OpenAI-style chat model, run by
// `forkline kernel` (package kernelapi) through signed webhooks.
//
//   KERNEL_URL=http://127.0.0.1:8480 AGENT_ID=notes AGENT_SECRET=... \
//   MODEL_URL=http://127.0.0.1:9999/v1 PORT=0 node agent.mjs
//
// It prints "listening PORT" once it accepts webhooks. Every effect — each
// model call and each tool call — goes through the kernel: submit the step,
// and run it only on "proceed"; a "replay" hands back the recorded result,
// so a re-dispatched run picks up where the last one stopped.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const KERNEL = (process.env.KERNEL_URL || "http://127.0.0.1:8480").replace(/\/+$/, "");
const AGENT = process.env.AGENT_ID || "notes";
const SECRET = process.env.AGENT_SECRET || "";
const MODEL_URL = (process.env.MODEL_URL || "").replace(/\/+$/, "");
const MODEL = process.env.MODEL || "scripted";
// CRASH_AT=n kills the process (SIGKILL) when the kernel answers "proceed"
// for the n-th time: a test's crash with a step in flight.
const CRASH_AT = Number(process.env.CRASH_AT || 0);
let proceeds = 0;

function sign(ts, body) {
  return "sha256=" + createHmac("sha256", SECRET).update(ts + "." + body).digest("hex");
}

class Stop extends Error {}

// A client for one dispatch: every request is signed; writes carry the
// dispatch headers from the webhook.
function kernel(execId, dispatchId, attempt) {
  async function send(method, path, body) {
    const text = body === undefined ? "" : JSON.stringify(body);
    const ts = String(Math.floor(Date.now() / 1000));
    const resp = await fetch(KERNEL + path, {
      method,
      headers: {
        "Content-Type": "application/json",
        "Rebuno-Agent-Id": AGENT,
        "Rebuno-Timestamp": ts,
        "Rebuno-Signature": sign(ts, text),
        "Rebuno-Dispatch-Id": dispatchId,
        "Rebuno-Dispatch-Attempt": String(attempt),
      },
      body: method === "GET" ? undefined : text,
    });
    const out = resp.status === 204 ? null : await resp.json();
    if (resp.status === 409) throw new Stop("attempt superseded");
    if (resp.status >= 400) throw new Error(`${method} ${path}: ${resp.status} ${out && out.code}: ${out && out.message}`);
    return out;
  }
  const base = `/v0/executions/${execId}`;
  // step runs one effect through the kernel.
  async function step(kind, target, args, run) {
    const d = await send("POST", base + "/steps", { kind, target, args, idempotency: "safe_to_retry" });
    switch (d.decision) {
      case "replay":
        if (d.error) throw new Error(`${target}: ${d.error.message}`);
        return d.result;
      case "proceed": {
        proceeds++;
        if (CRASH_AT && proceeds === CRASH_AT) process.kill(process.pid, "SIGKILL");
        let result;
        try {
          result = await run();
        } catch (e) {
          await send("POST", `${base}/steps/${d.step_id}/fail`, { error: String(e.message || e) });
          throw e;
        }
        await send("POST", `${base}/steps/${d.step_id}/complete`, { result });
        return result;
      }
      case "denied":
        throw new Error(`${target} denied: ${d.reason}`);
      default: // blocked, execution_blocked, execution_terminal
        throw new Stop(d.decision);
    }
  }
  return { send, step, base };
}

// The tools the model may call.
const tools = {
  add: async ({ a, b }) => ({ sum: a + b }),
  upper: async ({ text }) => ({ text: String(text).toUpperCase() }),
};

async function chat(messages) {
  const resp = await fetch(MODEL_URL + "/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages }),
  });
  if (!resp.ok) throw new Error(`model: ${resp.status}`);
  return resp.json();
}

async function runDispatch(execId, dispatchId, attempt) {
  const k = kernel(execId, dispatchId, attempt);
  const beat = setInterval(() => k.send("POST", k.base + "/heartbeat").catch(() => {}), 1000);
  try {
    const ex = await k.send("GET", k.base);
    const messages = [{ role: "user", content: String(ex.input && ex.input.task) }];
    for (let turn = 0; turn < 20; turn++) {
      const reply = await k.step("llm_call", MODEL, { model: MODEL, messages }, () => chat(messages));
      const msg = reply.choices[0].message;
      messages.push(msg);
      if (!msg.tool_calls || msg.tool_calls.length === 0) {
        await k.send("POST", k.base + "/complete", { output: { answer: msg.content, turns: turn + 1 } });
        return;
      }
      for (const call of msg.tool_calls) {
        const fn = tools[call.function.name];
        const args = JSON.parse(call.function.arguments);
        const result = await k.step("tool_call", call.function.name, args, () =>
          fn ? fn(args) : Promise.reject(new Error(`no tool ${call.function.name}`)));
        messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
      }
    }
    await k.send("POST", k.base + "/fail", { error: "too many turns" });
  } catch (e) {
    if (!(e instanceof Stop)) console.error(`execution ${execId}: ${e.message}`);
  } finally {
    clearInterval(beat);
  }
}

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const want = Buffer.from(sign(req.headers["rebuno-timestamp"] || "", body));
    const got = Buffer.from(String(req.headers["rebuno-signature"] || ""));
    const age = Math.abs(Date.now() / 1000 - Number(req.headers["rebuno-timestamp"]));
    if (got.length !== want.length || !timingSafeEqual(got, want) || !(age <= 300)) {
      res.writeHead(401).end();
      return;
    }
    let w;
    try {
      w = JSON.parse(body);
    } catch {
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200).end();
    runDispatch(w.execution_id, w.dispatch_id, w.dispatch_attempt);
  });
});
server.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
