// The lego-rl dashboard page: polls the read-only JSON API (or reads data embedded by
// `legorl export`) and draws every view with charts.js.
"use strict";
(() => {
  const STATIC = window.LEGORL_STATIC || null;
  const POLL_MS = 3000;
  const RUN_COLORS = ["#3867d6", "#e17055", "#00b894", "#6c5ce7", "#fdcb6e", "#d63031", "#0984e3", "#636e72"];
  const REASON_COLORS = {
    completed: "#00b894", max_turns: "#fdcb6e", agent_timeout: "#e17055", context_overflow: "#a29bfe",
    output_limit: "#74b9ff", resource_limit: "#fd79a8",
    cheat_blocked: "#e84393", harness_crash: "#d63031", api_error: "#b33939", sandbox_error: "#636e72",
    verifier_timeout: "#2d3436", verifier_error: "#535c68", task_error: "#6c5ce7", internal_error: "#000000", cancelled: "#b2bec3",
  };
  const ATTRIBUTION_COLORS = { none: "#00b894", policy: "#fdcb6e", infrastructure: "#d63031" };
  const state = { runs: [], selected: [], data: {}, openTrial: null };
  const $ = (id) => document.getElementById(id);

  async function api(path) {
    if (STATIC) return STATIC.api[path.split("?")[0]] || null;
    const res = await fetch(path, { credentials: "same-origin" });
    if (!res.ok) throw new Error(`${path}: ${res.status}`);
    return res.json();
  }

  const colorOf = (runId) => RUN_COLORS[state.runs.findIndex((r) => r.id === runId) % RUN_COLORS.length];
  const reasonColor = (r) => REASON_COLORS[r] || "#95a0b4";
  const focus = () => state.selected[0];
  const selectedData = () => state.selected.filter((id) => state.data[id]).map((id) => [id, state.data[id]]);

  async function loadRuns() {
    state.runs = (await api("/api/runs")) || [];
    if (!state.selected.length && state.runs.length) state.selected = [state.runs[state.runs.length - 1].id];
    const box = $("runs");
    box.innerHTML = "";
    for (const run of state.runs) {
      const label = document.createElement("label");
      const cb = document.createElement("input");
      cb.type = "checkbox"; cb.checked = state.selected.includes(run.id); cb.dataset.run = run.id;
      cb.addEventListener("change", () => {
        state.selected = cb.checked ? [...state.selected, run.id] : state.selected.filter((x) => x !== run.id);
        refresh(true);
      });
      label.appendChild(cb);
      label.insertAdjacentHTML("beforeend", `<i style="background:${colorOf(run.id)}"></i>`);
      label.appendChild(document.createTextNode(run.id));
      const replay = run.routing_replay ? ` · replay ${run.routing_replay}` : "";
      label.insertAdjacentHTML("beforeend", ` <span class="badge ${run.status || ""}">${run.status || "?"}${replay}</span>`);
      box.appendChild(label);
    }
  }

  async function loadData(force) {
    let changed = false;
    for (const id of state.selected) {
      const have = state.data[id];
      const got = await api(`/api/runs/${encodeURIComponent(id)}` + (have && !force ? `?since=${have.version}` : ""));
      if (got && !got.unchanged) { state.data[id] = got; changed = true; }
    }
    return changed;
  }

  // ------------------------------------------------------------------ step views
  function stepSeries(key, label, opts = {}) {
    return selectedData().map(([id, d]) => ({
      name: label || key, run: id, color: opts.color || colorOf(id),
      points: d.steps.map((s) => [s.step, typeof key === "function" ? key(s) : s[key]]),
    }));
  }

  function drawReward() {
    const series = [];
    for (const [id, d] of selectedData()) {
      const dots = [];
      for (const s of d.steps) {
        const n = s.rewards.length;
        s.rewards.forEach((r, i) => dots.push([s.step, r, `step ${s.step}: reward ${r}`, n > 1 ? (i / (n - 1) - 0.5) * 0.3 : 0]));
      }
      series.push({ name: "trials", run: id, color: colorOf(id), points: dots, line: false, radius: 2, opacity: 0.35 });
      series.push({ name: "mean", run: id, color: colorOf(id), points: d.steps.map((s) => [s.step, s.reward_mean]) });
      series.push({ name: "mean10", run: id, color: colorOf(id), dash: "5 3", radius: 1.2, points: d.steps.map((s) => [s.step, s.reward_mean10, `step ${s.step}: 10-step moving mean ${Charts.fmt(s.reward_mean10)}`]) });
      const held = Object.values(heldOut(d)).map((e) => [e.policy_version, e.success, `held-out ${e.label} (policy version ${e.policy_version}): ${Charts.fmt(e.success)} of ${e.scored} scored`]);
      series.push({ name: "held-out", run: id, color: "#d63031", points: held, line: false, radius: 5 });
    }
    Charts.line($("chart-reward"), "reward", series, { yMin: 0, yMax: 1, xLabel: "step" });
    Charts.line($("chart-informative"), "informative", stepSeries("informative_share", "informative"), { yMin: 0, yMax: 1, xLabel: "step" });
  }

  // The last evaluation of each label ("before", "after"), from the run's evaluation events.
  function heldOut(d) {
    const out = {};
    for (const e of d.evaluations || []) out[e.label] = e;
    return out;
  }

  // Headline numbers: the report once written; held-out before/after from events while live.
  function drawReport() {
    const d = state.data[focus()], box = $("report");
    if (!d) return;
    const r = d.report && !d.report.error ? d.report : null, held = heldOut(d);
    const pair = (a, b, gain) => `${Charts.fmt(a)} → ${Charts.fmt(b)} <small>(${gain === null || gain === undefined ? "–" : (gain >= 0 ? "+" : "") + Charts.fmt(gain)})</small>`;
    const facts = [];
    const before = held.before ? held.before.success : null, after = held.after ? held.after.success : null;
    if (held.before || held.after) {
      const n = (held.after || held.before).scored;
      facts.push(["held-out success", pair(before, after, before !== null && after !== null ? after - before : null) + ` <small>${n} scored</small>`, "heldout"]);
    }
    if (r) {
      facts.push([`train reward (first / last ${r.window} steps)`, pair(r.reward_first10, r.reward_last10, r.gain), "gain"]);
      facts.push(["informative groups", Charts.fmt(r.informative_share), "informative"]);
      facts.push(["minutes", Charts.fmt(r.minutes), "minutes"]);
      const m = r.time_split.mean;
      facts.push(["seconds per step", `generation ${Charts.fmt(m.generation_s)} · harness+sandbox ${Charts.fmt(m.harness_sandbox_s)} · verifier ${Charts.fmt(m.verifier_s)} · training ${Charts.fmt(m.training_s)}`, "split"]);
    } else if (d.report && d.report.error) {
      facts.push(["report", escapeHtml(d.report.error), "error"]);
    }
    $("report-section").hidden = !facts.length;
    box.innerHTML = facts.map(([k, v, key]) => `<span data-fact="${key}">${k} <b>${v}</b></span>`).join("");
  }

  function drawStacked(target, name, field, colors) {
    const id = focus(), d = state.data[id];
    if (!d) return;
    const x = d.steps.map((s) => s.step);
    const names = [...new Set(d.steps.flatMap((s) => Object.keys(s[field] || {})))].sort();
    const stacks = names.map((n) => ({ name: n, color: colors(n), values: d.steps.map((s) => (s[field] || {})[n] || 0) }));
    Charts.stacked($(target), name, x, stacks, { xLabel: `step (${id})` });
    Charts.legend($(target), stacks);
  }

  function drawGroup(containerId, group, titles, extra) {
    const box = $(containerId);
    box.innerHTML = "";
    const charts = Object.keys(titles);
    for (const chart of charts) {
      const fig = document.createElement("figure");
      fig.innerHTML = `<figcaption>${titles[chart]}</figcaption><div></div>`;
      box.appendChild(fig);
      const series = [];
      for (const [id, d] of selectedData()) {
        const keys = extra && extra[chart] ? extra[chart] : (d.metric_keys[group] || {})[chart] || [];
        for (const key of keys) {
          const label = typeof key === "string" ? key : key.name;
          const get = typeof key === "string" ? (s) => s[key] : key.get;
          series.push({ name: label, run: id, color: colorOf(id), points: d.steps.map((s) => [s.step, get(s)]) });
        }
      }
      const names = [...new Set(series.map((s) => s.name))];
      series.forEach((s) => { if (names.indexOf(s.name) % 2) s.dash = "4 3"; });
      const empty = (extra && extra.empty) || "not reported by this run's trainer";
      Charts.line(fig.lastChild, chart, series, { xLabel: "step", emptyText: empty, ...(extra && extra.opts && extra.opts[chart]) });
      if (series.length > 1) Charts.legend(fig.lastChild, series.map((s) => ({ name: state.selected.length > 1 ? `${s.run}: ${s.name}` : s.name, color: s.color, dash: s.dash })));
    }
  }

  function drawHacking() {
    drawGroup("hacking", "hacking", {
      reward_hacking_flags: "trials flagged by reward-hacking (count)",
      reward_hacking_rewarded: "flagged share of the rewarded trials",
    }, {
      reward_hacking_flags: ["reward_hacking_flags"], reward_hacking_rewarded: ["reward_hacking_rewarded"],
      empty: "no rewarded trial yet",
      opts: { reward_hacking_flags: { yMin: 0 }, reward_hacking_rewarded: { yMin: 0, yMax: 1 } },
    });
  }

  // A trial's reward-hacking record: flags (file:line, pattern, kind) and the verifier's evidence.
  function hackingItems(record) {
    if (!record) return "";
    const flags = (record.flags || []).map((f) => `<li><span class="kind hack">${escapeHtml(f.kind)}</span>${escapeHtml(`${f.file}:${f.lineno} ${f.pattern}${f.crossed === false ? " (did not cross)" : ""}: ${f.line}`)}</li>`);
    const more = record.flags_total > (record.flags || []).length ? [`<li>… ${record.flags_total - record.flags.length} more</li>`] : [];
    const evidence = (record.evidence || []).map((e) => `<li><span class="kind other">evidence</span>${escapeHtml(e)}</li>`);
    const head = record.blocked ? "Reward hacking (blocked)" : "Reward hacking (flagged; reward unchanged)";
    return `<h3>${head}</h3><ul class="tools" id="trial-hacking">${[...flags, ...more, ...evidence].join("")}</ul>`;
  }

  function drawConsistency() {
    drawGroup("consistency", "consistency", {
      prob_pearson: "probability Pearson (train vs inference)", k3: "k3 KL estimate",
      logp_diff_abs: "mean |Δ log p|", routing_agreement: "routing agreement",
      correction: "rollout correction (effective sample size, tokens masked, weights capped, mean weight)",
    });
  }

  function drawThroughput() {
    drawGroup("throughput", "scheduling", {
      trials_per_min: "trials per minute", tokens_per_s: "tokens per second (sampled, trained)",
      trainer_wait: "trainer wait, slot and inference busy (fractions)", staleness: "staleness (policy-version lag)",
    }, {
      trials_per_min: ["trials_per_min"],
      tokens_per_s: ["sampled_tokens_per_s", "trained_tokens_per_s"],
    });
    drawGroup("proxy-caches", "proxy", { cache_bytes: "proxy cache bytes (all caches, and each)" }, {
      empty: "no proxy cache sizes in this run's steps", opts: { cache_bytes: { yMin: 0 } },
    });
  }

  function drawBehaviour() {
    const b = (k) => ({ name: k, get: (s) => (s.behaviour || {})[k] });
    drawGroup("behaviour", "behaviour", {
      verified_after_edit: "verify after the last edit (share of editing trials)",
      tests_after_change: "run the tests after a change (share of editing trials)",
      files_before_edit: "distinct files inspected before the first edit (mean)",
      edit_share: "trials that edit a file (share)",
      correction_rate: "rewarded after a failed test run (share of the trials that saw one)",
      after_failure: "after a failed test run: a new edit, the same edit again, no further edit (shares of the trials that saw one)",
    }, {
      verified_after_edit: [b("verified_after_edit")], tests_after_change: [b("tests_after_change")],
      files_before_edit: [b("files_before_edit")], edit_share: [b("edit_share")],
      correction_rate: [b("correction_rate")],
      after_failure: [b("after_failure_changed"), b("after_failure_repeated"), b("after_failure_stopped")],
      empty: "no trial edited a file yet",
      opts: { verified_after_edit: { yMin: 0, yMax: 1 }, tests_after_change: { yMin: 0, yMax: 1 }, edit_share: { yMin: 0, yMax: 1 }, files_before_edit: { yMin: 0 }, correction_rate: { yMin: 0, yMax: 1 }, after_failure: { yMin: 0, yMax: 1 } },
    });
  }

  // ------------------------------------------------------------------ trial browser
  function fillSelect(sel, values) {
    const keep = sel.value;
    sel.innerHTML = '<option value="">all</option>' + values.map((v) => `<option>${escapeHtml(v)}</option>`).join("");
    sel.value = values.includes(keep) ? keep : "";
  }

  function filteredTrials() {
    const d = state.data[focus()];
    if (!d) return [];
    const task = $("f-task").value, reason = $("f-reason").value;
    const lo = parseFloat($("f-min").value), hi = parseFloat($("f-max").value);
    return d.trials.filter((t) => (!task || t.task === task) && (!reason || t.termination === reason)
      && (Number.isNaN(lo) || t.reward >= lo) && (Number.isNaN(hi) || t.reward <= hi));
  }

  function drawTrials() {
    const d = state.data[focus()];
    if (!d) return;
    fillSelect($("f-task"), [...new Set(d.trials.map((t) => t.task))].sort());
    fillSelect($("f-reason"), [...new Set(d.trials.map((t) => t.termination))].sort());
    const trials = filteredTrials();
    $("f-count").textContent = `${trials.length} of ${d.trials.length} trials`;
    const byReason = {};
    const perStep = {};
    for (const t of trials) {
      const k = perStep[t.step] = (perStep[t.step] || 0) + 1;
      (byReason[t.termination] = byReason[t.termination] || []).push([t.step, t.reward, `${t.trial_id}\n${t.task}: ${t.termination}, reward ${t.reward}`, ((k % 7) - 3) * 0.06, t.trial_id]);
    }
    const series = Object.entries(byReason).map(([reason, points]) => ({
      name: reason, run: focus(), color: reasonColor(reason), points, line: false, radius: 4,
      onClick: (p) => openTrial(p[4]),
    }));
    Charts.line($("chart-trials"), "trials", series, { yMin: 0, yMax: 1, xLabel: "step", height: 180, emptyText: "no trial matches" });
    Charts.legend($("chart-trials"), series);
    const list = $("trial-list");
    list.innerHTML = "";
    for (const t of trials.slice(-300)) {
      const btn = document.createElement("button");
      btn.dataset.trial = t.trial_id;
      btn.title = `${t.task}: ${t.termination}, reward ${t.reward}${t.reward_hacking ? ", flagged by reward-hacking" : ""}`;
      btn.innerHTML = `<i style="background:${reasonColor(t.termination)}"></i>${escapeHtml(t.trial_id)}${t.reward_hacking ? " ⚑" : ""}`;
      if (t.reward_hacking) btn.classList.add("flagged");
      if (t.trial_id === state.openTrial) btn.classList.add("open");
      btn.addEventListener("click", () => openTrial(t.trial_id));
      list.appendChild(btn);
    }
  }

  async function openTrial(trialId) {
    state.openTrial = trialId;
    const detail = await api(`/api/runs/${encodeURIComponent(focus())}/trials/${encodeURIComponent(trialId)}`);
    const box = $("trial");
    box.hidden = false;
    if (!detail) { box.textContent = `trial ${trialId}: no details stored`; return; }
    const r = detail.result, h = r.harness || {}, b = detail.behaviour || {};
    box.innerHTML = `<h3 data-trial="${escapeHtml(r.trial_id)}">${escapeHtml(r.trial_id)}</h3>
      <div class="facts"><span>task <b>${escapeHtml(r.task)}</b></span><span>reward <b>${r.reward}</b></span>
      <span>termination <b style="color:${reasonColor(r.termination)}">${escapeHtml(r.termination)}</b></span>
      <span>attribution <b>${escapeHtml(r.attribution)}</b></span><span>step <b>${r.step}</b></span>
      <span>calls <b>${detail.calls.length}</b></span><span>tool calls <b>${detail.tool_calls.length}</b></span>
      <span>files read before edit <b>${b.files_before_edit ?? "–"}</b></span>
      <span>verified after edit <b>${b.verified_after_edit ?? "–"}</b></span></div>
      <div class="facts">${escapeHtml(r.reason || "")}</div>
      <div class="row">
        <figure><figcaption>time per phase</figcaption><div id="trial-timings"></div></figure>
        <figure><figcaption>tokens per call (prompt, completion); red: prompt did not extend the previous call</figcaption><div id="trial-calls"></div></figure>
        <figure class="wide"><figcaption>segments (width = tokens; red edge = rewrite, a new segment)</figcaption><div id="trial-segments"></div></figure>
      </div>
      ${hackingItems((r.verifier || {}).reward_hacking)}
      <h3>Tool calls</h3><ul class="tools" id="trial-tools"></ul>
      <h3>Harness transcript</h3><pre id="trial-transcript"></pre>
      <h3>Verifier</h3><pre id="trial-verifier"></pre>`;
    const phases = (r.timings || []).filter((t) => t.seconds > 0);
    const palette = ["#3867d6", "#00b894", "#fdcb6e", "#e17055", "#6c5ce7", "#636e72", "#0984e3"];
    Charts.strip($("trial-timings"), "timings", phases.map((t, i) => ({ name: t.phase, value: t.seconds, color: palette[i % palette.length], tip: `${t.phase}: ${Charts.fmt(t.seconds)} s` })));
    const total = phases.reduce((a, t) => a + t.seconds, 0);
    Charts.legend($("trial-timings"), phases.map((t, i) => ({ name: `${t.phase} ${Charts.fmt(t.seconds)} s`, color: palette[i % palette.length], keep: t.seconds >= total * 0.01 })).filter((x) => x.keep));
    const calls = detail.calls;
    Charts.stacked($("trial-calls"), "calls", calls.map((c) => c.index), [
      { name: "prompt", color: "#b2bec3", values: calls.map((c) => c.prompt_tokens || 0) },
      { name: "completion", color: "#3867d6", values: calls.map((c) => c.completion_tokens || 0) },
    ], { xLabel: "call", height: 150 });
    calls.forEach((c, i) => {
      if (i > 0 && !c.extends_previous) {
        const rect = $("trial-calls").querySelector(`g[data-series="prompt"] rect:nth-of-type(${i + 1})`);
        if (rect) rect.setAttribute("stroke", "#d63031");
      }
    });
    const segs = detail.segments ? detail.segments.segments : [];
    const byIndex = new Map(calls.map((c) => [c.index, c]));
    const why = (s) => {
      const first = byIndex.get(s.calls[0]);
      if (!s.rewrite) return "";
      if (!first || !first.boundary) return " (rewrite)";
      return ` (${first.boundary}: ${first.boundary_tokens} context tokens not reproduced)`;
    };
    Charts.strip($("trial-segments"), "segments", segs.map((s) => ({
      name: `segment ${s.index}`, value: s.tokens, mark: s.rewrite, color: s.rewrite ? "#e17055" : "#3867d6",
      label: `#${s.index}: ${s.tokens} tok, ${s.trained} trained`, tip: `segment ${s.index}: ${s.tokens} tokens, ${s.trained} trained, calls ${s.calls.join(", ")}${why(s)}`,
    })), { emptyText: detail.segments ? "no segments" : "trajectory file not stored", caption: detail.segments && detail.segments.rolled_back.length ? `rolled back calls: ${detail.segments.rolled_back.join(", ")}` : "" });
    const tools = $("trial-tools");
    for (const c of detail.tool_calls) {
      const li = document.createElement("li");
      const kinds = c.actions.length ? c.actions.map((a) => a.kind) : ["other"];
      li.innerHTML = kinds.map((k) => `<span class="kind ${k}">${k}</span>`).join("");
      const args = c.arguments.command ?? c.arguments.cmd ?? JSON.stringify(c.arguments);
      li.appendChild(document.createTextNode(`${c.name}: ${args}`));
      tools.appendChild(li);
    }
    if (!detail.tool_calls.length) tools.innerHTML = "<li>no tool calls</li>";
    $("trial-transcript").textContent = h.transcript || "(no transcript)";
    $("trial-verifier").textContent = Object.entries(r.verifier || {})
      .map(([k, v]) => typeof v === "string" && v.includes("\n") ? `${k}:\n${v}` : `${k}: ${JSON.stringify(v)}`).join("\n") || "(no verifier output)";
    for (const btn of document.querySelectorAll(".trial-list button")) btn.classList.toggle("open", btn.dataset.trial === trialId);
  }

  function escapeHtml(s) {
    return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  function drawAll() {
    drawReport();
    drawReward();
    drawStacked("chart-terminations", "terminations", "terminations", reasonColor);
    drawStacked("chart-attribution", "attribution", "attribution", (n) => ATTRIBUTION_COLORS[n] || "#95a0b4");
    drawHacking();
    drawConsistency();
    drawThroughput();
    drawBehaviour();
    drawTrials();
    document.body.dataset.ready = "1";
  }

  async function refresh(force) {
    try {
      if (force || !STATIC) await loadRuns();
      if (await loadData(force) || force) drawAll();
      const d = state.data[focus()];
      $("status").textContent = STATIC ? "static export" : d ? `${d.info.status} · ${d.steps.length} steps · ${d.trials.length} trials · updated ${new Date().toLocaleTimeString()}` : "no run";
    } catch (err) {
      $("status").textContent = `error: ${err.message}`;
    }
  }

  for (const id of ["f-task", "f-reason", "f-min", "f-max"]) $(id).addEventListener("input", drawTrials);
  window.addEventListener("resize", () => drawAll());
  refresh(true).then(() => { if (!STATIC) setInterval(() => refresh(false), POLL_MS); });
})();
