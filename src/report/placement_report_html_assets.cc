// The inline CSS and script of the HTML placement report. The script never
// builds markup from strings: names reach the page only through textContent,
// so a hostile node name stays text. It marks the page as rendered so a
// headless browser check (tests/report/render_html_in_chromium.sh) can tell
// that it ran.
#include "report/report_internal.h"

namespace tessera::report_detail {

const char kHtmlStyle[] = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header, section { padding: 8px 16px; }
h1 { font-size: 18px; margin: 4px 0; }
h2 { font-size: 16px; margin: 16px 0 6px; }
.legend { list-style: none; padding: 0; margin: 6px 0; display: flex; flex-wrap: wrap; gap: 6px 18px; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #555; border-radius: 3px;
          margin-right: 5px; vertical-align: -1px; }
.count, .hint, .type, .names { color: #666; }
.tools { margin: 6px 0; }
main { display: flex; gap: 8px; padding: 0 16px; }
#canvas { flex: 1; min-width: 0; border: 1px solid #ccc; background: #fff; }
#graph { display: block; width: 100%; height: 72vh; cursor: grab; user-select: none; }
#graph.dragging { cursor: grabbing; }
#graph text { font: 11px system-ui, sans-serif; text-anchor: middle; pointer-events: none; }
#graph text.op { font-weight: 600; }
#graph text.badge { font-size: 9px; text-anchor: end; font-weight: 600; }
#graph .io rect { fill: #fff; stroke: #333; stroke-dasharray: 4 2; }
#graph .item { cursor: pointer; }
#graph .item.selected rect { stroke: #000; stroke-width: 3; }
#edges path { fill: none; stroke: #999; stroke-width: 1.2; marker-end: url(#arrow); }
#details { width: 340px; max-height: 72vh; overflow: auto; border: 1px solid #ccc; background: #fff;
           padding: 8px 10px; box-sizing: border-box; font-size: 13px; }
#details h3 { font-size: 14px; margin: 2px 0 6px; word-break: break-all; }
#details dt { font-weight: 600; margin-top: 4px; }
#details dd { margin: 0 0 0 10px; word-break: break-word; }
#details .claims { color: #2a7a2a; }
table.regions { border-collapse: collapse; background: #fff; }
table.regions th, table.regions td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
details.none summary { color: #888; }
)CSS";

const char kHtmlScript[] = R"JS(
(function () {
  'use strict';
  var body = document.body;
  try {
    var items = JSON.parse(document.getElementById('tessera-item-data').textContent);
    var svg = document.getElementById('graph');
    var details = document.getElementById('details');
    var groups = svg.querySelectorAll('g.item');
    var full = { w: parseFloat(svg.getAttribute('data-width')), h: parseFloat(svg.getAttribute('data-height')) };
    var view = { x: 0, y: 0, w: full.w, h: full.h };
    var pinned = -1;
    var drag = null;

    function apply() { svg.setAttribute('viewBox', view.x + ' ' + view.y + ' ' + view.w + ' ' + view.h); }
    function size() { var r = svg.getBoundingClientRect(); return { w: r.width || 800, h: r.height || 600, r: r }; }
    // showAll: the whole graph; otherwise no smaller than 35% (a long chain
    // would shrink to nothing), starting at the top.
    function fit(showAll) {
      var s = size();
      var scale = Math.min(1, s.w / full.w, s.h / full.h);
      if (!showAll && scale < 0.35) scale = Math.min(1, Math.max(0.35, s.w / full.w));
      view = { x: 0, y: 0, w: s.w / scale, h: s.h / scale };
      if (full.w < view.w) view.x = -(view.w - full.w) / 2;
      apply();
    }
    function toGraph(event) {
      var s = size();
      return { x: view.x + (event.clientX - s.r.left) * view.w / s.w, y: view.y + (event.clientY - s.r.top) * view.h / s.h };
    }
    function add(list, term, text, className) {
      var dt = document.createElement('dt'); dt.textContent = term; list.appendChild(dt);
      var dd = document.createElement('dd'); dd.textContent = text; if (className) dd.className = className;
      list.appendChild(dd);
    }
    function values(list) {
      return list.length ? list.map(function (v) { return v[0] + ' ' + v[1] + (v[2] ? ' (constant)' : ''); }).join(', ') : 'none';
    }
    function show(index, target) {
      var item = items[index];
      var panel = target || details;
      panel.textContent = '';
      var title = document.createElement('h3');
      title.textContent = item.kind === 'node' ? item.op + ' ' + item.name : item.kind + ' ' + item.name;
      panel.appendChild(title);
      var list = document.createElement('dl');
      if (item.kind !== 'node') {
        add(list, 'type', item.type);
      } else {
        add(list, 'backend', item.backend + (item.region >= 0 ? ', region ' + item.region : ''));
        if (item.why) add(list, 'why', item.why);
        if (item.note) add(list, 'note', item.note);
        if (item.precision) add(list, 'precision', item.precision + ' (float32 accumulation)');
        if (item.precisionNote) add(list, 'precision', 'float32: ' + item.precisionNote);
        if (item.ms !== null) add(list, 'time', item.ms.toFixed(3) + ' ms');
        item.refusals.forEach(function (r) {
          add(list, r[0], r[1] ? 'refuses: ' + r[1] : 'claims it', r[1] ? '' : 'claims');
        });
        add(list, 'inputs', values(item.inputs));
        add(list, 'outputs', values(item.outputs));
      }
      panel.appendChild(list);
    }
    function select(index) {
      if (pinned >= 0) groups[pinned].classList.remove('selected');
      pinned = index;
      if (index >= 0) { groups[index].classList.add('selected'); show(index); }
    }
    function itemIndex(target) {
      var group = target.closest ? target.closest('g.item') : null;
      return group ? parseInt(group.getAttribute('data-index'), 10) : -1;
    }

    svg.addEventListener('wheel', function (event) {
      event.preventDefault();
      var point = toGraph(event);
      var factor = Math.exp(Math.max(-300, Math.min(300, event.deltaY)) * 0.0015);
      view.x = point.x - (point.x - view.x) * factor;
      view.y = point.y - (point.y - view.y) * factor;
      view.w *= factor; view.h *= factor;
      apply();
    }, { passive: false });
    svg.addEventListener('pointerdown', function (event) {
      if (event.button !== 0) return;
      drag = { x: event.clientX, y: event.clientY, viewX: view.x, viewY: view.y, moved: false };
    });
    window.addEventListener('pointermove', function (event) {
      if (!drag) return;
      var s = size();
      var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; svg.classList.add('dragging'); }
      view.x = drag.viewX - dx * view.w / s.w;
      view.y = drag.viewY - dy * view.h / s.h;
      apply();
    });
    window.addEventListener('pointerup', function () { svg.classList.remove('dragging'); setTimeout(function () { drag = null; }, 0); });
    svg.addEventListener('click', function (event) {
      if (drag && drag.moved) return;
      var index = itemIndex(event.target);
      select(index === pinned ? -1 : index);
    });
    svg.addEventListener('mouseover', function (event) {
      var index = itemIndex(event.target);
      if (index >= 0 && pinned < 0 && !drag) show(index);
    });
    document.getElementById('fit').addEventListener('click', function () { fit(true); });
    document.getElementById('top').addEventListener('click', function () { fit(false); });
    document.getElementById('search').addEventListener('keydown', function (event) {
      if (event.key !== 'Enter' || !this.value) return;
      var query = this.value.toLowerCase();
      for (var step = 1; step <= items.length; ++step) {
        var index = (Math.max(pinned, -1) + step) % items.length;
        if (items[index].name.toLowerCase().indexOf(query) >= 0) {
          select(index);
          view.x = items[index].x + 80 - view.w / 2;
          view.y = items[index].y + 20 - view.h / 2;
          apply();
          return;
        }
      }
    });

    fit(false);
    // Fill a detached panel once, so a headless check also exercises the
    // details code that otherwise runs only on hover.
    for (var probe = 0; probe < items.length; ++probe) {
      if (items[probe].kind === 'node') { show(probe, document.createElement('div')); break; }
    }
    body.setAttribute('data-node-count', String(svg.querySelectorAll('g.node').length));
    body.setAttribute('data-rendered', 'ok');
  } catch (error) {
    body.setAttribute('data-rendered', 'error: ' + error);
  }
})();
)JS";

}  // namespace tessera::report_detail
