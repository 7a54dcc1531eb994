// The poolgate HTML report's filter bar; the page's CSP admits it by its SHA-256
// (htmlassets.py). It only shows, hides, opens and closes what is on the page.
(function () {
  "use strict";
  var bar = document.getElementById("filters");
  var root = document.getElementById("findings");
  if (!bar || !root) return;
  var groups = Array.prototype.slice.call(root.querySelectorAll("details.obj"));
  var rows = [], owner = [], texts = null;
  groups.forEach(function (group, index) {
    var cells = group.querySelectorAll("tbody tr");
    for (var i = 0; i < cells.length; i++) { rows.push(cells[i]); owner.push(index); }
  });
  var shown = bar.querySelector("output");
  function value(name) {
    var field = bar.querySelector("[name=" + name + "]");
    return field ? field.value : "";
  }
  function apply() {
    var levels = {};
    bar.querySelectorAll("input[name=level]").forEach(function (box) {
      levels[box.value] = box.checked;
    });
    var rule = value("rule"), ns = value("ns"), drift = value("drift");
    var query = value("q").trim().toLowerCase();
    if (query && texts === null) {
      var heads = groups.map(function (group) {
        return group.querySelector("summary").textContent;
      });
      texts = rows.map(function (row, k) {
        return (heads[owner[k]] + " " + row.textContent).toLowerCase();
      });
    }
    var per = groups.map(function () { return 0; }), count = 0;
    rows.forEach(function (row, k) {
      var ok = levels[row.getAttribute("data-l")] !== false &&
        (!rule || row.getAttribute("data-r") === rule) &&
        (!ns || groups[owner[k]].getAttribute("data-ns") === ns) &&
        (!drift || row.getAttribute("data-d") === drift) &&
        (!query || texts[k].indexOf(query) >= 0);
      if (row.hidden === ok) row.hidden = !ok;
      if (ok) { per[owner[k]]++; count++; }
    });
    var narrowed = Boolean(rule || ns || drift || query);
    groups.forEach(function (group, index) {
      group.hidden = per[index] === 0;
      if (narrowed && per[index]) group.open = true;
    });
    shown.value = "Showing " + count + " of " + rows.length + " findings";
  }
  bar.addEventListener("input", apply);
  bar.addEventListener("click", function (event) {
    var act = event.target.getAttribute("data-act");
    if (!act) return;
    groups.forEach(function (group) { if (!group.hidden) group.open = act === "open"; });
  });
  bar.hidden = false;
  document.documentElement.setAttribute("data-filters", "ready");
})();
