/* kernopt report: small interactions on a page that is complete without them. Errors are recorded
   in body[data-errors]; body[data-rendered="ok"] means this script finished. Run text is only ever
   read from attributes and written with textContent. */
(function () {
  "use strict";
  var body = document.body;
  function fail(msg) {
    body.dataset.errors = (body.dataset.errors ? body.dataset.errors + " | " : "") + msg;
  }
  window.addEventListener("error", function (e) {
    fail("error: " + (e.message || e.type) + (e.filename ? " (" + e.filename + ":" + e.lineno + ")" : ""));
  });
  window.addEventListener("unhandledrejection", function (e) { fail("unhandled rejection: " + String(e.reason)); });

  function openAround(el) {
    for (var p = el; p; p = p.parentElement) { if (p.tagName === "DETAILS") { p.open = true; } }
  }
  function go(id) {
    var el = document.getElementById(id);
    if (!el) { return false; }
    el.classList.remove("hidden");
    openAround(el);
    el.scrollIntoView({block: "start"});
    el.classList.remove("flash");
    void el.getBoundingClientRect();
    el.classList.add("flash");
    return true;
  }

  // tree nodes, plot points and parent links: open the candidate's section and scroll to it
  document.addEventListener("click", function (e) {
    var t = e.target;
    var a = t && t.closest ? t.closest("a[href^='#']") : null;
    if (a) {
      var id = decodeURIComponent(a.getAttribute("href").slice(1));
      if (go(id)) {
        e.preventDefault();
        try { history.replaceState(null, "", "#" + id); } catch (err) { /* file:// may refuse */ }
      }
      return;
    }
    var b = t && t.closest ? t.closest("button[data-action]") : null;
    if (b) {
      var scope = b.closest("[data-scope]") || document;
      var open = b.dataset.action === "expand";
      scope.querySelectorAll("details.cand").forEach(function (d) { d.open = open; });
    }
  });

  // one filter chip per status present in a run's candidate list (click: show/hide that status)
  document.querySelectorAll("[data-scope]").forEach(function (scope) {
    var bar = scope.querySelector(".filters");
    if (!bar) { return; }
    var counts = {};
    scope.querySelectorAll("details.cand[data-status]").forEach(function (d) {
      counts[d.dataset.status] = (counts[d.dataset.status] || 0) + 1;
    });
    Object.keys(counts).sort().forEach(function (status) {
      var chip = document.createElement("button");
      chip.type = "button";
      chip.className = "chip st-" + status;
      chip.textContent = status.replace(/_/g, " ") + " " + counts[status];
      chip.dataset.status = status;
      chip.addEventListener("click", function () {
        var off = chip.classList.toggle("off");
        scope.querySelectorAll("details.cand[data-status]").forEach(function (d) {
          if (d.dataset.status === status) { d.classList.toggle("hidden", off); }
        });
      });
      bar.appendChild(chip);
    });
    bar.dataset.chips = String(Object.keys(counts).length);
  });

  // tooltips for plot points and tree nodes
  var tip = document.createElement("div");
  tip.id = "tip";
  body.appendChild(tip);
  document.addEventListener("mouseover", function (e) {
    var el = e.target && e.target.closest ? e.target.closest("[data-tip]") : null;
    if (!el) { tip.style.display = "none"; return; }
    tip.textContent = el.getAttribute("data-tip");
    tip.style.display = "block";
  });
  document.addEventListener("mousemove", function (e) {
    if (tip.style.display === "block") {
      tip.style.left = Math.min(e.clientX + 14, window.innerWidth - 430) + "px";
      tip.style.top = (e.clientY + 14) + "px";
    }
  });

  if (location.hash.length > 1) { go(decodeURIComponent(location.hash.slice(1))); }
  body.dataset.rendered = "ok";
})();
