// toolgate console: the only script. It keeps regions marked `data-poll` current and
// runs the "Try it" form, streaming the call's events. Everything else is plain HTML.
// Text from the gateway is inserted with textContent; only the console's own
// server-rendered (escaped) fragments are inserted as HTML.
"use strict";

(function () {
  const csrf = () => {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  };

  // Live regions: re-fetch the fragment every `data-every` ms while the page is
  // visible, one request at a time, and not while the keyboard focus is inside (a
  // replaced button would lose it).
  function poll(region) {
    const url = region.getAttribute("data-poll");
    const every = Math.max(1000, parseInt(region.getAttribute("data-every"), 10) || 2000);
    let busy = false;
    let stopped = false;
    let last = region.innerHTML;
    const tick = async () => {
      if (busy || stopped || document.hidden || region.contains(document.activeElement)) {
        return;
      }
      busy = true;
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), 10000);
      try {
        const response = await fetch(url, { credentials: "same-origin", signal: controller.signal });
        const text = await response.text();
        // Replaced only when it changed: a screen reader announces every change of a
        // live region.
        if (text !== last) {
          region.innerHTML = text;
          last = text;
        }
        region.setAttribute("data-updated", String(Date.now()));
        if (response.status === 401) {
          stopped = true;
        }
      } catch (e) {
        // A missed refresh is retried on the next tick.
      } finally {
        clearTimeout(timer);
        busy = false;
      }
    };
    setInterval(tick, every);
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The arguments the form describes: the JSON box when filled, else each field by
  // its declared type (empty fields are left out).
  function readArguments(form) {
    const raw = form.querySelector("#args-json");
    if (raw && raw.value.trim() !== "") {
      const parsed = JSON.parse(raw.value);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new Error("the arguments must be a JSON object");
      }
      return parsed;
    }
    const args = {};
    form.querySelectorAll("[data-arg]").forEach((field) => {
      const value = field.value;
      if (value === "") return;
      const name = field.getAttribute("data-arg");
      switch (field.getAttribute("data-type")) {
        case "number":
          args[name] = Number(value);
          break;
        case "json":
          try {
            args[name] = JSON.parse(value);
          } catch (e) {
            args[name] = value;
          }
          break;
        default:
          args[name] = value;
      }
    });
    return args;
  }

  const MAX_EVENTS = 500;

  function addEvent(list, name, text) {
    const item = el("li");
    item.setAttribute("data-event", name);
    item.appendChild(el("span", "ev-name", name));
    item.appendChild(document.createTextNode(" " + text));
    list.appendChild(item);
    while (list.children.length > MAX_EVENTS) list.removeChild(list.firstChild);
  }

  function describe(name, data) {
    switch (name) {
      case "tool_call_start":
        return data.summary || data.tool || "";
      case "tool_progress": {
        const parts = [];
        if (data.text) parts.push(data.text);
        if (data.progress !== undefined) {
          parts.push(data.total !== undefined ? data.progress + "/" + data.total : String(data.progress));
        }
        if (data.closed) parts.push("(" + (data.stream || "progress") + " closed)");
        return parts.join(" ");
      }
      case "tool_call_complete":
        return (data.is_error ? "error: " : "ok: ") + (data.summary || "") +
          " in " + data.duration_ms + " ms";
      default:
        return "";
    }
  }

  function showResult(box, data) {
    box.textContent = "";
    if (data && data.error) {
      box.appendChild(el("p", "notice bad", data.error.code + ": " + data.error.message));
      return;
    }
    const usage = data.usage || {};
    const facts = el("dl", "facts");
    const fact = (k, v, cls) => {
      facts.appendChild(el("dt", "", k));
      const dd = el("dd", cls || "", v);
      facts.appendChild(dd);
      return dd;
    };
    fact("Outcome", data.is_error ? "tool error" : "ok", data.is_error ? "req" : "");
    fact("Result tokens", String(usage.result_tokens));
    fact("Tokens as the upstream returned them", String(usage.original_tokens));
    const cut = fact("Truncated", usage.truncated ? "yes: fitted to the result budget" : "no",
      usage.truncated ? "truncated" : "");
    cut.id = "truncated";
    box.appendChild(facts);
    (data.content || []).forEach((part) => {
      if (part.type === "text") {
        box.appendChild(el("pre", "", part.text));
      } else {
        box.appendChild(el("pre", "", JSON.stringify(part, null, 2).slice(0, 20000)));
      }
    });
    if (data.structured_content !== undefined) {
      box.appendChild(el("h4", "", "Structured content"));
      box.appendChild(el("pre", "", JSON.stringify(data.structured_content, null, 2).slice(0, 50000)));
    }
  }

  // Server-sent events from a fetch body: `event:` and `data:` lines, frames apart.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        frame.split("\n").forEach((line) => {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        });
        if (data.length) {
          try {
            onEvent(name, JSON.parse(data.join("\n")));
          } catch (e) {
            onEvent(name, { text: data.join("\n") });
          }
        }
      }
    }
  }

  function tryForm(form) {
    const events = document.getElementById("events");
    const result = document.getElementById("result");
    const button = form.querySelector('button[type="submit"]');
    form.addEventListener("submit", async (submit) => {
      submit.preventDefault();
      events.textContent = "";
      let args;
      try {
        args = readArguments(form);
      } catch (e) {
        result.textContent = "";
        result.appendChild(el("p", "notice bad", "Arguments: " + e.message));
        return;
      }
      const tenant = form.querySelector("#as-tenant");
      result.textContent = "";
      result.appendChild(el("p", "hint", "Calling…"));
      button.disabled = true;
      try {
        const response = await fetch(form.getAttribute("data-call"), {
          method: "POST",
          credentials: "same-origin",
          headers: {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "X-CSRF-Token": csrf(),
          },
          body: JSON.stringify({ tenant: tenant ? tenant.value : "", arguments: args }),
        });
        const type = response.headers.get("content-type") || "";
        if (!response.ok || !type.startsWith("text/event-stream")) {
          let message = "HTTP " + response.status;
          try {
            const body = await response.json();
            if (body.error) message += ": " + body.error.message;
          } catch (e) { /* not JSON */ }
          result.textContent = "";
          result.appendChild(el("p", "notice bad", message));
          return;
        }
        await readEvents(response, (name, data) => {
          if (name === "result") {
            showResult(result, data);
          } else {
            addEvent(events, name, describe(name, data));
          }
        });
      } catch (e) {
        result.textContent = "";
        result.appendChild(el("p", "notice bad", "The call failed: " + e.message));
      } finally {
        button.disabled = false;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("[data-poll]").forEach(poll);
    const form = document.getElementById("try");
    if (form) tryForm(form);
  });
})();
