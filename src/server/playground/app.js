// The needle playground: keeps the conversation in the page (the server is
// stateless over HTTP and reuses its KV cache when a request extends an
// earlier one) and renders each answer: calls, reasoning, confidence, timings.
"use strict";

const $ = (id) => document.getElementById(id);
let messages = [];

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("apikey").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function showError(el, text) {
  el.textContent = text;
  el.hidden = !text;
}

function logLine(role, text) {
  const li = document.createElement("li");
  const r = document.createElement("span");
  r.className = "role";
  r.textContent = role;
  li.appendChild(r);
  li.appendChild(document.createTextNode(text));
  $("log").appendChild(li);
}

function readTools() {
  const text = $("tools").value.trim();
  if (!text) return [];
  let tools;
  try {
    tools = JSON.parse(text);
  } catch (e) {
    throw new Error("tools: not valid JSON: " + e.message);
  }
  if (!Array.isArray(tools)) throw new Error("tools: must be a JSON array");
  return tools;
}

function render(resp) {
  const msg = resp.choices[0].message;
  const calls = msg.tool_calls || [];
  const body = $("calls").querySelector("tbody");
  body.textContent = "";
  calls.forEach((c, i) => {
    const tr = document.createElement("tr");
    tr.className = "call";
    const td = (t, code) => {
      const d = document.createElement("td");
      if (code) {
        const k = document.createElement("code");
        k.textContent = t;
        d.appendChild(k);
      } else d.textContent = t;
      tr.appendChild(d);
    };
    td(String(i + 1));
    td(c.function.name);
    let args = c.function.arguments;
    try { args = JSON.stringify(JSON.parse(args), null, 1).replace(/\n\s*/g, " "); } catch (e) { /* shown as sent */ }
    td(args, true);
    body.appendChild(tr);
  });
  $("calls").hidden = calls.length === 0;
  $("no-calls").hidden = calls.length > 0;
  const n = resp.needle || {};
  const conf = typeof n.confidence === "number" ? n.confidence : null;
  $("confidence-bar").style.width = conf === null ? "0" : (100 * conf).toFixed(1) + "%";
  $("confidence").textContent = conf === null ? "n/a" : conf.toFixed(3);
  const t = n.timings || {};
  const fmt = (v, d) => (typeof v === "number" ? v.toFixed(d) : "?");
  $("timings").textContent =
    `${fmt(t.total_ms, 1)} ms (queue ${fmt(t.queue_ms, 1)} ms) · prefill ${fmt(t.prefill_tokens_per_s, 0)} tok/s · ` +
    `decode ${fmt(t.decode_tokens_per_s, 0)} tok/s · RSS ${fmt(n.rss_mb, 1)} MiB · session ${n.session || "?"}` +
    (resp.usage ? ` · ${resp.usage.prompt_tokens}+${resp.usage.completion_tokens} tokens` : "");
  $("reasoning").textContent = n.reasoning || "(none)";
  $("json").textContent = JSON.stringify(resp, null, 2);
  $("result").hidden = false;
  $("tool-form").hidden = calls.length === 0;
}

async function complete(newMessages) {
  showError($("error"), "");
  showError($("tools-error"), "");
  let tools;
  try {
    tools = readTools();
  } catch (e) {
    showError($("tools-error"), e.message);
    return;
  }
  const system = $("system").value.trim();
  const all = (system ? [{ role: "system", content: system }] : []).concat(messages, newMessages);
  const body = { model: "needle", messages: all, tools: tools };
  for (const b of document.querySelectorAll("button")) b.disabled = true;
  try {
    const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    const resp = await r.json();
    if (!r.ok) {
      showError($("error"), `HTTP ${r.status}: ${resp.error ? resp.error.message : JSON.stringify(resp)}`);
      return;
    }
    messages = messages.concat(newMessages, [resp.choices[0].message]);
    const calls = resp.choices[0].message.tool_calls || [];
    logLine("assistant", calls.length ? calls.map((c) => `${c.function.name}(${c.function.arguments})`).join(", ")
                                      : "(no call)");
    render(resp);
  } catch (e) {
    showError($("error"), "request failed: " + e.message);
  } finally {
    for (const b of document.querySelectorAll("button")) b.disabled = false;
  }
}

$("ask").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("request").value.trim();
  if (!text) return;
  logLine("user", text);
  $("request").value = "";
  complete([{ role: "user", content: text }]);
});

$("tool-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const last = messages[messages.length - 1];
  const calls = (last && last.tool_calls) || [];
  const text = $("tool-result").value.trim();
  logLine("tool", text);
  // one result answers every call of the last turn
  complete(calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: text })).slice(0, 1));
});

$("reset").addEventListener("click", () => {
  messages = [];
  $("log").textContent = "";
  $("result").hidden = true;
  $("tool-form").hidden = true;
  showError($("error"), "");
});

fetch("/playground/tools.json")
  .then((r) => r.json())
  .then((tools) => { $("tools").value = JSON.stringify(tools, null, 2); })
  .catch((e) => showError($("tools-error"), "could not load the demo tools: " + e.message));
