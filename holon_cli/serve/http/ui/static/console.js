/* holon web console: the page's one script (no framework, no build step).
 *
 * - live updates: an EventSource on the page's data-live URL; the server
 *   sends named events only ("row": a conversation row, "panel": an element
 *   to replace whole), already rendered and escaped, so this script only
 *   places the HTML it is given (it never builds markup from data);
 * - display modes (info, verbose, debug): a class on <body>, no reload;
 * - actions: a form with data-post is sent as JSON to that control route
 *   (the same routes the CLI and curl use; the login cookie authorises it);
 *   the answer, or the error's message and hint, is shown in #notice.
 *
 * Served from /ui/static under Content-Security-Policy default-src 'self':
 * no inline script or handler exists anywhere in the console.
 */
(function () {
  "use strict";

  var notice = document.getElementById("notice");
  var live = document.getElementById("live");

  function say(text, kind) {
    if (!notice) return;
    notice.textContent = text;
    notice.className = "notice " + (kind || "");
    notice.hidden = !text;
  }

  function parse(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    return t.content;
  }

  // ------------------------------------------------------------ conversation

  var conv = document.getElementById("conversation");

  function atBottom() {
    return !conv || conv.scrollHeight - conv.scrollTop - conv.clientHeight < 40;
  }

  function toBottom() {
    if (conv) conv.scrollTop = conv.scrollHeight;
  }

  function lastSeq() {
    var last = conv && conv.lastElementChild;
    return last ? parseInt(last.getAttribute("data-seq") || "0", 10) : 0;
  }

  function addRow(data) {
    if (!conv || data.seq <= lastSeq()) return; // a resumed stream repeats nothing
    var stick = atBottom();
    conv.appendChild(parse(data.html));
    if (stick) toBottom();
  }

  // ------------------------------------------------------------ panels

  var waiting = {}; // panels held back while the operator types in them

  function replacePanel(data) {
    var el = document.getElementById(data.id);
    if (!el) return;
    var active = document.activeElement;
    if (active && el.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) {
      waiting[data.id] = data;
      return;
    }
    var open = {};
    el.querySelectorAll("details[id]").forEach(function (d) {
      open[d.id] = d.open;
    });
    var fresh = parse(data.html);
    fresh.querySelectorAll("details[id]").forEach(function (d) {
      if (d.id in open) d.open = open[d.id];
    });
    el.replaceWith(fresh);
  }

  document.addEventListener("focusout", function () {
    setTimeout(function () {
      Object.keys(waiting).forEach(function (id) {
        var data = waiting[id];
        delete waiting[id];
        replacePanel(data);
      });
    }, 0);
  });

  // ------------------------------------------------------------ display modes

  function setMode(mode) {
    document.body.setAttribute("data-mode", mode);
    document.querySelectorAll("[data-mode-link]").forEach(function (a) {
      a.setAttribute("aria-current", a.getAttribute("data-mode-link") === mode ? "true" : "false");
    });
    var url = new URL(window.location.href);
    url.searchParams.set("mode", mode);
    window.history.replaceState(null, "", url.toString());
    toBottom();
  }

  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("[data-mode-link]");
    if (a) {
      ev.preventDefault();
      setMode(a.getAttribute("data-mode-link"));
    }
  });

  // ------------------------------------------------------------ actions

  // A form's JSON body: its named fields (empty ones left out; data-type
  // integer, number or boolean typed), under data-wrap's name when given, or
  // data-json's literal. Field names come from servers: a null-prototype
  // object keeps "__proto__" an ordinary key.
  function collect(form) {
    var literal = form.getAttribute("data-json");
    if (literal) return JSON.parse(literal);
    var fields = Object.create(null);
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.disabled) return;
      var type = el.getAttribute("data-type");
      if (el.type === "checkbox") fields[el.name] = el.checked;
      else if (el.value === "") return;
      else if (type === "integer" || type === "number") fields[el.name] = Number(el.value);
      else fields[el.name] = el.value;
    });
    var wrap = form.getAttribute("data-wrap");
    if (!wrap) return fields;
    var body = Object.create(null);
    body[wrap] = fields;
    return body;
  }

  function send(form) {
    var url = form.getAttribute("data-post");
    var body = collect(form);
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    say("");
    return fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(body),
      credentials: "same-origin",
    })
      .then(function (r) {
        return r.text().then(function (text) {
          var json = null;
          try { json = JSON.parse(text); } catch (e) { json = null; }
          return { ok: r.ok, status: r.status, body: json };
        });
      })
      .then(function (res) {
        if (res.ok) {
          var extra = res.body && (res.body.summary_text || res.body.message_id);
          say((form.getAttribute("data-done") || "Done") + (extra ? ": " + extra : ""), "ok");
          if (form.hasAttribute("data-reset")) form.reset();
        } else {
          var err = res.body && res.body.error;
          say(err ? err.message + (err.hint ? " (" + err.hint + ")" : "") : "HTTP " + res.status, "error");
        }
      })
      .catch(function () {
        say("serve did not answer; is it still running?", "error");
      })
      .finally(function () {
        buttons.forEach(function (b) { b.disabled = false; });
      });
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.hasAttribute || !form.hasAttribute("data-post")) return;
    ev.preventDefault();
    send(form);
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && ev.target.form &&
        ev.target.form.hasAttribute("data-post")) {
      ev.preventDefault();
      ev.target.form.requestSubmit();
    }
  });

  // ------------------------------------------------------------ live

  var main = document.querySelector("[data-live]");
  function state(text, kind) {
    if (!live) return;
    live.textContent = text;
    live.className = "live " + (kind || "");
  }

  if (main && window.EventSource) {
    var source = new EventSource(main.getAttribute("data-live"));
    source.addEventListener("open", function () { state("live", "on"); });
    source.addEventListener("row", function (ev) { addRow(JSON.parse(ev.data)); });
    source.addEventListener("panel", function (ev) { replacePanel(JSON.parse(ev.data)); });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) {
        state("live updates stopped: reload the page", "off");
      } else {
        state("reconnecting…", "off");
      }
    });
    window.addEventListener("pagehide", function () { source.close(); });
  }

  toBottom();
})();
