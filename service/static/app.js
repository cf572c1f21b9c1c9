// Switchyard web page: plain JavaScript, no framework, nothing fetched but this server's own API.
// All server text is inserted with textContent / DOM nodes, never as HTML.
"use strict";

(function () {
  const TOKEN_KEY = "switchyard.apiToken";

  // ---------------------------------------------------------------- Server-Sent Events over fetch()

  /** Incremental SSE parser: feed() it decoded text in chunks split anywhere; it calls onEvent(type, data)
   *  once per complete event (lines `event:` / `data:`, a blank line ends an event, `:` lines are comments). */
  class SSEParser {
    constructor(onEvent) {
      this.onEvent = onEvent;
      this.buffer = "";
      this.reset();
    }

    reset() {
      this.type = "";
      this.data = [];
    }

    feed(text) {
      this.buffer += text;
      this._drain(false);
    }

    /** The stream ended: a last event without its blank line is still delivered. */
    end() {
      this._drain(true);
      if (this.buffer) this._line(this.buffer);
      this.buffer = "";
      this._dispatch();
    }

    _drain(final) {
      const eol = /\r\n|\r|\n/g;
      let start = 0;
      let match;
      while ((match = eol.exec(this.buffer)) !== null) {
        // a "\r" at the very end may be the first half of "\r\n": wait for the next chunk
        if (!final && match[0] === "\r" && match.index === this.buffer.length - 1) break;
        this._line(this.buffer.slice(start, match.index));
        start = eol.lastIndex;
      }
      this.buffer = this.buffer.slice(start);
    }

    _line(line) {
      if (line === "") { this._dispatch(); return; }
      if (line.startsWith(":")) return; // comment / keep-alive ping
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") this.type = value;
      else if (field === "data") this.data.push(value);
    }

    _dispatch() {
      if (this.data.length) this.onEvent(this.type || "message", this.data.join("\n"));
      this.reset();
    }
  }

  class ApiError extends Error {
    constructor(status, detail, retryAfter) {
      super(detail);
      this.status = status;
      this.retryAfter = retryAfter;
    }
  }

  function describeError(err) {
    if (err instanceof ApiError) {
      if (err.status === 401) {
        return "Unauthorized (401): this server requires an API token. Enter it in the “API token” field " +
          "at the top of the page.";
      }
      if (err.status === 429) {
        const wait = err.retryAfter ? ` Retry in ${err.retryAfter} s.` : "";
        return `Too many runs in flight (429): ${err.message}.${wait}`;
      }
      return `HTTP ${err.status}: ${err.message}`;
    }
    if (err && err.name === "TypeError") return `Could not reach the server: ${err.message}`;
    return String((err && err.message) || err);
  }

  async function detailOf(response) {
    const text = await response.text().catch(() => "");
    try {
      const body = JSON.parse(text);
      const detail = body.detail !== undefined ? body.detail : body;
      if (typeof detail === "string") return detail;
      if (Array.isArray(detail)) {  // FastAPI validation errors
        return detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
      }
      return JSON.stringify(detail);
    } catch (_) {
      return text.trim().slice(0, 300) || response.statusText || "request failed";
    }
  }

  function token() {
    return els.token.value.trim();
  }

  /** fetch() against the API with the bearer token; a non-2xx reply throws ApiError with the server's detail. */
  async function api(path, options = {}) {
    const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
    if (token()) headers.Authorization = `Bearer ${token()}`;
    const response = await fetch(path, Object.assign({}, options, { headers }));
    if (!response.ok) {
      throw new ApiError(response.status, await detailOf(response), response.headers.get("Retry-After"));
    }
    return response;
  }

  /** POST the question and call onEvent(type, payload) for each SSE event until the stream ends. */
  async function streamAsk(body, onEvent, signal) {
    const response = await api("v1/ask/stream", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal,
    });
    const parser = new SSEParser((type, data) => {
      let payload;
      try { payload = JSON.parse(data); } catch (_) { payload = { raw: data }; }
      onEvent(type, payload);
    });
    const reader = response.body.getReader();
    const decoder = new TextDecoder("utf-8");
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
    parser.feed(decoder.decode());
    parser.end();
  }

  /** POST a JSON body and return the JSON reply (a run that may pause: graph.router.approve). */
  async function postJson(path, body, signal) {
    const response = await api(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal,
    });
    return response.json();
  }

  // ---------------------------------------------------------------- small DOM helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "className") node.className = value;
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function formatMs(ms) {
    if (ms === undefined || ms === null || Number.isNaN(Number(ms))) return "–";
    ms = Number(ms);
    if (ms < 1) return "<1 ms";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  }

  function plural(n, word) {
    return `${n} ${word}${n === 1 ? "" : "s"}`;
  }

  function basename(path) {
    const parts = String(path || "").split(/[\\/]/);
    return parts[parts.length - 1] || String(path || "");
  }

  function sourceLabel(item) {
    const page = item.page !== null && item.page !== undefined ? `, p. ${item.page}` : "";
    return `${basename(item.source)}${page}`;
  }

  // ---------------------------------------------------------------- one run (one column)

  class RunView {
    constructor(slot, pipeline) {
      this.slot = slot;
      this.pipeline = pipeline;
      this.root = els.template.content.firstElementChild.cloneNode(true);
      this.root.dataset.run = slot;
      this.root.id = `run-${slot}`;
      this.q = (sel) => this.root.querySelector(sel);
      this.answer = this.q('[data-role="answer"]');
      this.answer.id = slot === "a" ? "answer" : `answer-${slot}`;
      this.nodes = this.q('[data-role="nodes"]');
      this.decisions = this.q('[data-role="decisions"]');
      this.passages = this.q('[data-role="passages"]');
      this.sources = this.q('[data-role="sources"]');
      this.errorBox = this.q('[data-role="error"]');
      this.statusBadge = this.q('[data-role="status"]');
      this.detailsToggle = this.q('[data-role="details-toggle"]');
      this.detailsToggle.addEventListener("click", () => this.setCollapsed(!this.root.classList.contains("collapsed")));
      this.streamed = "";
      this.finished = false;
      this.generation = state.generation;
      const info = state.pipelines.find((p) => p.name === pipeline);
      this.q(".run-pipeline").textContent = pipeline;
      const mode = this.q(".run-mode");
      mode.textContent = info ? info.mode.replace("_", " ") : "";
      mode.hidden = !info;
      this.setStatus("running", "streaming…");
      this.startClock();
    }

    /** A newer question was asked: this run becomes an earlier turn. It gives up its ids (#run-a, #answer: always
     *  the newest turn's) and folds its metrics and trace away behind a "details" button. */
    retire() {
      this.root.removeAttribute("id");
      this.answer.removeAttribute("id");
      this.detailsToggle.hidden = false;
      this.setCollapsed(true);
    }

    setCollapsed(collapsed) {
      this.root.classList.toggle("collapsed", collapsed);
      this.detailsToggle.setAttribute("aria-expanded", String(!collapsed));
      this.detailsToggle.textContent = collapsed ? "details" : "hide details";
    }

    /** A discreet line above the answer: the standalone question a follow-up searched, or a note. */
    showStandalone(label, text) {
      const line = this.q('[data-role="standalone"]');
      line.hidden = false;
      line.replaceChildren(el("span", { className: "standalone-label" }, label),
        text ? el("span", { className: "standalone-text" }, `“${text}”`) : null);
    }

    setStatus(status, label) {
      this.root.dataset.status = status;
      this.statusBadge.textContent = label;
      this.statusBadge.dataset.status = status;
    }

    setMetric(name, text, value) {
      const metric = this.q(`[data-metric="${name}"]`);
      metric.querySelector("dd").textContent = text;
      if (value !== undefined) metric.dataset.value = String(value);
    }

    handle(type, ev) {
      if (this.finished) return;
      switch (type) {
        case "run_start": this.root.dataset.runId = ev.run_id || ""; break;
        case "node_start": this.nodeStart(ev); break;
        case "node_end": this.nodeEnd(ev); break;
        case "passages": this.showPassages(ev); break;
        case "decision": this.addDecision(ev); break;
        case "token": this.addToken(ev.text || ""); break;
        case "answer": this.finish(ev.result); break;
        case "error": this.fail(ev.message || "the run failed"); break;
        default: break;
      }
    }

    nodeStart(ev) {
      const li = el("li", { dataset: { node: ev.node, state: "running" } },
        el("span", { className: "node-dot", "aria-hidden": "true" }),
        el("span", { className: "node-name" }, ev.node),
        el("span", { className: "node-info muted" }, "running…"));
      this.nodes.append(li);
      this.liveLlmCalls();
    }

    nodeEnd(ev) {
      let li = Array.from(this.nodes.querySelectorAll(`li[data-state="running"]`))
        .reverse().find((n) => n.dataset.node === ev.node);
      if (!li) {  // a node_end without its start: still list it
        this.nodeStart(ev);
        li = this.nodes.lastElementChild;
      }
      li.dataset.state = "done";
      li.dataset.ms = String(ev.ms);
      li.dataset.llmCalls = String(ev.llm_calls || 0);
      li.dataset.promptTokens = String(ev.prompt_tokens || 0);
      li.dataset.completionTokens = String(ev.completion_tokens || 0);
      const info = li.querySelector(".node-info");
      info.textContent = `${formatMs(ev.ms)} · ${plural(ev.llm_calls || 0, "LLM call")}`;
      if (ev.llm_calls) info.title = `${ev.prompt_tokens || 0} prompt / ${ev.completion_tokens || 0} completion tokens`;
      this.liveLlmCalls();
    }

    /** Running totals from the finished nodes until the final usage arrives. */
    liveLlmCalls() {
      let calls = 0;
      let prompt = 0;
      let completion = 0;
      for (const li of this.nodes.querySelectorAll('li[data-state="done"]')) {
        calls += Number(li.dataset.llmCalls || 0);
        prompt += Number(li.dataset.promptTokens || 0);
        completion += Number(li.dataset.completionTokens || 0);
      }
      this.setMetric("llm-calls", `${calls}…`);
      this.setMetric("tokens", `${prompt} / ${completion}…`);
    }

    /** A wall clock while the run streams; the server's total_ms replaces it at the end. */
    startClock() {
      const started = performance.now();
      const tick = () => this.setMetric("latency", `${formatMs(performance.now() - started)}…`);
      tick();
      this.clock = setInterval(tick, 100);
    }

    stopClock() {
      clearInterval(this.clock);
    }

    showPassages(ev) {
      const box = this.q(".passages-box");
      box.hidden = false;
      this.q(".passages-node").textContent = `after ${ev.node}`;
      this.passages.replaceChildren(...(ev.passages || []).map((p) => el("li", { dataset: { docId: p.doc_id } },
        el("span", { className: "passage-title" }, p.title || p.doc_id),
        el("span", { className: "passage-meta muted" },
          sourceLabel(p), typeof p.score === "number" ? ` · ${p.score.toFixed(3)}` : ""))));
      if (!(ev.passages || []).length) {
        this.passages.append(el("li", { className: "muted none" }, "no passages"));
      }
    }

    addDecision(ev) {
      this.q(".decisions-box").hidden = false;
      const args = ev.args && Object.keys(ev.args).length ? JSON.stringify(ev.args) : "";
      this.decisions.append(el("li", { dataset: { action: ev.action || "", step: ev.step } },
        el("div", { className: "decision-line" },
          el("span", { className: "decision-step" }, `${ev.step}`),
          el("span", { className: "decision-action" }, ev.action || "?"),
          args ? el("code", { className: "decision-args" }, args) : null,
          ev.guard ? el("span", { className: "tag guard-tag", title: "a guard overrode the router" },
            `guard: ${ev.guard}`) : null,
          ev.human ? el("span", { className: "tag human-tag", title: ev.human.reason || "" },
            `human: ${ev.human.decision}`) : null),
        ev.thought ? el("div", { className: "decision-thought" }, ev.thought) : null));
    }

    /** A run paused before an action (graph.router.approve): show it with Approve / Edit / Reject. */
    showPending(paused) {
      this.paused = paused;
      this.setStatus("paused", "waiting for approval");
      this.stopClock();
      const box = this.q('[data-role="approval"]');
      const p = paused.pending;
      box.hidden = false;
      box.dataset.threadId = paused.thread_id;
      box.dataset.step = String(p.step);
      this.q('[data-role="pending-step"]').textContent = String(p.step);
      this.q('[data-role="pending-action"]').textContent = p.action;
      const guard = this.q('[data-role="pending-guard"]');
      guard.hidden = !p.guard;
      guard.textContent = p.guard ? `guard: ${p.guard}` : "";
      const thought = this.q('[data-role="pending-thought"]');
      thought.hidden = !p.thought;
      thought.textContent = p.thought || "";
      this.q('[data-role="pending-args"]').value = JSON.stringify(p.args || {});
      this.q('[data-role="pending-reason"]').value = "";
      this.q('[data-role="pending-expires"]').textContent =
        `Unanswered, this pause expires at ${new Date(paused.expires_at).toLocaleString()}.`;
      this.showApprovalError("");
      for (const button of box.querySelectorAll("button[data-decision]")) button.disabled = false;
    }

    showApprovalError(message) {
      const box = this.q('[data-role="approval-error"]');
      box.hidden = !message;
      box.textContent = message;
    }

    /** Send the human's answer; the reply is the next pause or the result. */
    async respond(decision) {
      if (!this.paused || this.finished) return;
      const body = { decision };
      if (decision === "edit") {
        try {
          body.arguments = JSON.parse(this.q('[data-role="pending-args"]').value || "{}");
        } catch (err) {
          this.showApprovalError(`The arguments are not JSON: ${err.message}`);
          return;
        }
      }
      const reason = this.q('[data-role="pending-reason"]').value.trim();
      if (decision === "reject" && reason) body.reason = reason;
      const box = this.q('[data-role="approval"]');
      for (const button of box.querySelectorAll("button[data-decision]")) button.disabled = true;
      this.setStatus("running", "running…");
      try {
        const reply = await postJson(`v1/threads/${encodeURIComponent(this.paused.thread_id)}/resume`, body);
        this.settle(reply);
      } catch (err) {
        if (err instanceof ApiError && err.status === 422) {  // the run stays paused: say why, ask again
          this.showPending(this.paused);
          this.showApprovalError(describeError(err));
        } else {
          box.hidden = true;
          this.fail(describeError(err));
        }
      }
    }

    /** A reply of /v1/ask or of a resume: a pause, or the final result (with its trace and steps). */
    settle(reply) {
      if (reply.status === "paused") { this.showPending(reply); return; }
      this.q('[data-role="approval"]').hidden = true;
      this.paused = null;
      for (const entry of reply.trace || []) this.nodeEnd(entry);
      for (const step of reply.steps || []) this.addDecision(step);
      this.finish(reply);
    }

    addToken(text) {
      this.streamed += text;
      this.answer.classList.add("provisional");
      this.q(".provisional-tag").hidden = false;
      this.answer.textContent = this.streamed;
    }

    finish(result) {
      this.finished = true;
      this.stopClock();
      this.result = result;
      this.answer.classList.remove("provisional");
      this.q(".provisional-tag").hidden = true;
      this.renderAnswer(result);
      if (result.standalone) this.showStandalone("searched: ", result.standalone);
      this.renderSources(result.citations || []);
      const usage = result.usage || {};
      this.setMetric("latency", formatMs(usage.total_ms), usage.total_ms);
      this.setMetric("llm-calls", String(usage.llm_calls ?? 0), usage.llm_calls ?? 0);
      const tokens = `${usage.prompt_tokens ?? 0} / ${usage.completion_tokens ?? 0}`;
      this.setMetric("tokens", tokens, (usage.prompt_tokens || 0) + (usage.completion_tokens || 0));
      this.setMetric("verdict", result.verdict || "–", result.verdict || "");
      const check = result.citation_check || {};
      const checkLine = this.q(".citation-check");
      checkLine.hidden = !check.sentences;
      if (check.sentences) {
        const changed = [["corrected", check.corrected], ["dropped", check.dropped], ["removed", check.removed]]
          .filter(([, n]) => n).map(([word, n]) => `${n} ${word}`);
        checkLine.textContent = `${check.kept} of ${plural(check.sentences, "sentence")} supported by the cited ` +
          `passages${changed.length ? ` (${changed.join(", ")})` : ""}`;
      }
      if (result.abstained) {
        this.answer.classList.add("abstained");
        this.q(".abstain-tag").hidden = false;
        this.setStatus("abstained", "abstained");
      } else {
        this.setStatus("done", "answered");
      }
      runEnded(this);
    }

    /** The verified answer, with each [n] (or [n, m]) turned into buttons that open the cited passage. */
    renderAnswer(result) {
      const text = result.answer || "";
      const byN = new Map((result.citations || []).map((c) => [Number(c.n), c]));
      const nodes = [];
      const marks = /\[(\d+(?:\s*,\s*\d+)*)\]/g;
      let last = 0;
      let match;
      while ((match = marks.exec(text)) !== null) {
        const numbers = match[1].split(",").map((s) => Number(s.trim()));
        if (!numbers.every((n) => byN.has(n))) continue;  // not a citation we can show: leave the text as is
        nodes.push(text.slice(last, match.index).replace(/\s+$/, ""));  // the marker hugs its sentence
        for (const n of numbers) nodes.push(this.citationButton(byN.get(n)));
        last = marks.lastIndex;
      }
      nodes.push(text.slice(last));
      this.answer.replaceChildren(...nodes.filter((n) => n !== ""));
    }

    citationButton(citation) {
      return el("button", {
        type: "button", className: "citation", dataset: { n: citation.n },
        title: `${citation.title} — ${sourceLabel(citation)}`,
        "aria-label": `citation ${citation.n}: ${citation.title}`,
        onclick: () => openPassage(citation),
      }, `[${citation.n}]`);
    }

    renderSources(citations) {
      this.q(".sources-box").hidden = !citations.length;
      this.sources.replaceChildren(...citations.map((c) => el("li", { dataset: { n: c.n } },
        el("button", { type: "button", className: "source-link", onclick: () => openPassage(c) },
          el("span", { className: "source-n" }, `[${c.n}]`),
          el("span", { className: "source-title" }, c.title || c.doc_id)),
        el("span", { className: "muted source-where", title: c.source || "" }, sourceLabel(c)))));
    }

    /** The run ended without an answer: an error (shown with its message), or stopped by the user. */
    fail(message, status = "error") {
      this.finished = true;
      this.stopClock();
      for (const dd of this.root.querySelectorAll(".metric dd")) dd.textContent = dd.textContent.replace(/…$/, "");
      this.errorBox.hidden = false;
      this.errorBox.dataset.kind = status;
      this.errorBox.replaceChildren(el("strong", {}, status === "error" ? "Error: " : "Stopped: "), message);
      this.answer.classList.remove("provisional");
      if (!this.streamed) this.answer.hidden = true;
      this.q(".provisional-tag").hidden = true;
      this.setStatus(status, status);
      this.nodes.querySelectorAll('li[data-state="running"]').forEach((li) => {
        li.dataset.state = "stopped";
        li.querySelector(".node-info").textContent = "stopped";
      });
      runEnded(this);
    }
  }

  // ---------------------------------------------------------------- page state and wiring

  const els = {};
  // turns: the conversation on the page, oldest first: {question, root, views: {a: RunView, b: RunView}}
  const state = { pipelines: [], collections: [], loaded: false, controllers: [], active: 0, generation: 0,
    listsSeq: 0, listsToken: null, turns: [] };

  function showBanner(message) {
    els.error.hidden = !message;
    els.error.textContent = message || "";
  }

  function fillSelect(select, items, labelOf, keep) {
    const previous = keep !== undefined ? keep : select.value;
    select.replaceChildren(...items.map((item) => el("option", { value: item.value }, labelOf(item))));
    if (items.some((i) => i.value === previous)) select.value = previous;
  }

  /** (Re)load the pipelines and collections; only the latest call's outcome is shown. */
  async function loadLists() {
    const seq = ++state.listsSeq;
    state.listsToken = token();
    els.server.textContent = "connecting…";
    els.server.dataset.state = "busy";
    try {
      const [pipelines, collections] = await Promise.all([
        api("v1/pipelines").then((r) => r.json()),
        api("v1/collections").then((r) => r.json()),
      ]);
      if (seq !== state.listsSeq) return state.loaded;
      state.pipelines = pipelines;
      state.collections = collections;
      const options = pipelines.map((p) => ({ value: p.name, p }));
      const modeLabel = (m) => (m === "closed_book" ? "closed book" : m);
      fillSelect(els.pipeline, options, (o) => `${o.p.name} (${modeLabel(o.p.mode)})`);
      const other = pipelines.find((p) => p.name !== els.pipeline.value);
      fillSelect(els.pipelineB, options, (o) => `${o.p.name} (${modeLabel(o.p.mode)})`,
        els.pipelineB.value || (other ? other.name : undefined));
      const collectionOptions = [{ value: "", label: "pipeline's own" }]
        .concat(collections.map((c) => ({ value: c.name, label: `${c.name} (${plural(c.chunks, "chunk")})` })));
      fillSelect(els.collection, collectionOptions, (o) => o.label);
      state.loaded = true;
      els.token.classList.remove("invalid");
      els.server.textContent = `${plural(pipelines.length, "pipeline")} · ${plural(collections.length, "collection")}`;
      els.server.dataset.state = "ok";
      showBanner("");
      return true;
    } catch (err) {
      if (seq !== state.listsSeq) return state.loaded;
      state.loaded = false;
      els.server.textContent = err instanceof ApiError && err.status === 401 ? "token needed" : "not connected";
      els.server.dataset.state = "error";
      if (err instanceof ApiError && err.status === 401) {
        els.token.classList.add("invalid");
        showBanner(token() ? "Unauthorized (401): the API token was rejected. Check it and press Enter."
          : "Unauthorized (401): this server requires an API token. Enter it in the “API token” field at the " +
            "top right and press Enter.");
      } else {
        showBanner(`Could not load the pipelines: ${describeError(err)}`);
      }
      return false;
    }
  }

  function openPassage(citation) {
    els.passageN.textContent = `[${citation.n}]`;
    els.passageTitle.textContent = citation.title || citation.doc_id;
    const page = citation.page !== null && citation.page !== undefined ? ` · page ${citation.page}` : "";
    els.passageSource.textContent = `${citation.source || "unknown source"}${page}`;
    els.passageText.textContent = citation.text || "";
    els.passageDoc.textContent = citation.doc_id || "";
    if (!els.panel.open) els.panel.showModal();
  }

  function setRunning(running) {
    els.ask.disabled = running;
    els.ask.textContent = running ? "Asking…" : "Ask";
    els.stop.hidden = !running;
    document.body.dataset.busy = running ? "true" : "false";
  }

  function runEnded(view) {
    if (view.generation !== state.generation) return;  // a run of an earlier question
    state.active = Math.max(0, state.active - 1);
    if (!state.active) setRunning(false);
  }

  function stopAll() {
    for (const controller of state.controllers) controller.abort();
    state.controllers = [];
  }

  // ---------------------------------------------------------------- the conversation
  //
  // Side by side, the page keeps ONE list of turns (the user's questions, shared) and each column its OWN answers:
  // a column's next question is sent with `messages` = every earlier question followed by that column's own answer
  // (slot a: the left / only column, slot b: the right one). Where a column has no answer for an earlier turn (it was
  // not shown then, or its run failed or was stopped), the left column's answer of that turn stands in; a turn with
  // no answer at all is left out. Answers are sent as the verified final text, [n] markers included; an abstention
  // is sent as its text. "New conversation" forgets every turn.

  /** The `messages` (OpenAI-style, oldest first) that column `slot` sends after `turns`
   *  ([{question, views: {a: {result}, b: {result}}}], a view's result being its final answer event's). */
  function conversationMessages(turns, slot) {
    const messages = [];
    for (const turn of turns) {
      const view = [turn.views[slot], turn.views.a, turn.views.b]
        .find((v) => v && v.result && String(v.result.answer || "").trim());
      if (!view) continue;
      messages.push({ role: "user", content: turn.question }, { role: "assistant", content: view.result.answer });
    }
    return messages;
  }

  function historyFor(slot) {
    return conversationMessages(state.turns, slot);
  }

  function updateConversationControls() {
    els.newConversation.disabled = !state.turns.length;
    const earlier = historyFor("a").length / 2;
    els.turnCount.hidden = !earlier;
    els.turnCount.textContent = earlier
      ? `Follow-up: the next question is asked after ${plural(earlier, "earlier turn")} of this conversation.`
      : "";
  }

  /** A new turn at the bottom of the conversation: the question and its run columns; the previous turn retires. */
  function addTurn(question, names, compare) {
    const previous = state.turns[state.turns.length - 1];
    if (previous) for (const view of Object.values(previous.views)) view.retire();
    const root = els.turnTemplate.content.firstElementChild.cloneNode(true);
    root.dataset.turn = String(state.turns.length + 1);
    root.querySelector('[data-role="question"]').textContent = question;
    const runs = root.querySelector('[data-role="runs"]');
    runs.dataset.mode = compare ? "compare" : "single";
    const views = names.map((name, i) => new RunView(i === 0 ? "a" : "b", name));
    runs.replaceChildren(...views.map((v) => v.root));
    const turn = { question, root, views: Object.fromEntries(views.map((v) => [v.slot, v])) };
    els.empty.hidden = true;
    els.conversation.append(root);
    return turn;
  }

  function newConversation() {
    stopAll();
    state.generation += 1;  // the stopped runs' endings are an earlier question's
    state.active = 0;
    setRunning(false);
    state.turns = [];
    els.empty.hidden = false;
    els.conversation.replaceChildren(els.empty);
    showBanner("");
    updateConversationControls();
    els.question.focus();
  }

  async function ask(event) {
    if (event) event.preventDefault();
    const question = els.question.value.trim();
    if (!question) { els.question.focus(); return; }
    if (!state.loaded && !(await loadLists())) return;
    showBanner("");
    stopAll();
    state.generation += 1;
    const compare = els.compare.checked;
    const names = compare ? [els.pipeline.value, els.pipelineB.value] : [els.pipeline.value];
    const collection = els.collection.value || undefined;
    const histories = { a: historyFor("a"), b: historyFor("b") };  // the earlier turns, before this one joins
    const turn = addTurn(question, names, compare);
    const views = Object.values(turn.views);
    state.turns.push(turn);
    els.question.value = "";
    updateConversationControls();
    if (state.turns.length > 1) turn.root.scrollIntoView({ block: "start" });
    state.active = views.length;
    setRunning(true);
    await Promise.all(views.map((view) => {
      const body = { question, pipeline: view.pipeline, collection };
      const messages = histories[view.slot];
      const info = state.pipelines.find((p) => p.name === view.pipeline);
      if (messages.length && info && info.approve) {  // the server answers 400 to earlier turns for such a run
        view.showStandalone("answers one question at a time: the earlier turns were not sent");
      } else if (messages.length) {
        body.messages = messages;
      }
      return runOne(view, body);
    }));
    updateConversationControls();
  }

  async function runOne(view, body) {
    const controller = new AbortController();
    state.controllers.push(controller);
    const info = state.pipelines.find((p) => p.name === body.pipeline);
    if (info && info.approve) {  // the run pauses before each action: no stream, one reply per pause
      controller.signal.addEventListener("abort", () => {
        if (!view.finished) view.fail("the run was left paused", "stopped");
      });
      view.q('[data-role="approval"]').addEventListener("click", (e) => {
        const decision = e.target.dataset && e.target.dataset.decision;
        if (decision) view.respond(decision);
      });
      try {
        view.settle(await postJson("v1/ask", body, controller.signal));
      } catch (err) {
        if (!view.finished) view.fail(describeError(err));
      }
      return;
    }
    try {
      await streamAsk(body, (type, payload) => view.handle(type, payload), controller.signal);
      if (!view.finished) view.fail("the stream ended before an answer arrived");
    } catch (err) {
      if (view.finished) return;
      if (err && err.name === "AbortError") view.fail("the run was stopped before its answer", "stopped");
      else {
        view.fail(describeError(err));
        if (err instanceof ApiError && err.status === 401) {
          els.token.classList.add("invalid");
          els.token.focus();
        }
      }
    }
  }

  function init() {
    const byId = (id) => document.getElementById(id);
    Object.assign(els, {
      form: byId("ask-form"), question: byId("question"), ask: byId("ask"), stop: byId("stop"),
      pipeline: byId("pipeline"), pipelineB: byId("pipeline-b"), pipelineBField: byId("pipeline-b-field"),
      collection: byId("collection"), compare: byId("compare"), token: byId("token"), server: byId("server-status"),
      error: byId("error"), conversation: byId("conversation"), empty: byId("empty"), template: byId("run-template"),
      turnTemplate: byId("turn-template"), newConversation: byId("new-conversation"), turnCount: byId("turn-count"),
      panel: byId("passage-panel"), passageN: byId("passage-n"), passageTitle: byId("passage-title"),
      passageSource: byId("passage-source"), passageText: byId("passage-text"), passageDoc: byId("passage-doc"),
    });
    try { els.token.value = localStorage.getItem(TOKEN_KEY) || ""; } catch (_) { /* storage disabled */ }

    const saveToken = () => {
      try {
        if (token()) localStorage.setItem(TOKEN_KEY, token());
        else localStorage.removeItem(TOKEN_KEY);
      } catch (_) { /* storage disabled */ }
    };
    els.token.addEventListener("input", saveToken);
    const tokenChanged = () => {
      saveToken();
      if (token() !== state.listsToken) loadLists();
    };
    els.token.addEventListener("change", tokenChanged);
    els.token.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); tokenChanged(); }
    });

    els.compare.addEventListener("change", () => {
      els.pipelineBField.hidden = !els.compare.checked;
      document.getElementById("pipeline-label").textContent = els.compare.checked ? "Left pipeline" : "Pipeline";
    });
    els.form.addEventListener("submit", ask);
    els.question.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        if (!els.ask.disabled) els.form.requestSubmit();
      }
    });
    els.stop.addEventListener("click", stopAll);
    els.newConversation.addEventListener("click", newConversation);
    els.panel.addEventListener("click", (e) => {  // a click on the backdrop closes the dialog
      if (e.target === els.panel) els.panel.close();
    });
    setRunning(false);
    loadLists();
  }

  window.Switchyard = { SSEParser, formatMs, conversationMessages };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
