// taskcenter web page. Plain JavaScript, no build step, no library: every page is a
// server-rendered shell, and this script fills it from the REST API (the only backend it
// talks to) with the session cookie, following live changes over Server-Sent Events and
// falling back to polling when a stream cannot be had.
(function () {
  'use strict';

  var boot = JSON.parse(document.getElementById('boot').textContent);
  var T = boot.i18n || {};
  var zh = boot.lang === 'zh';

  function t(key, vars) {
    var s = Object.prototype.hasOwnProperty.call(T, key) ? T[key] : key;
    if (vars) {
      Object.keys(vars).forEach(function (k) { s = s.split('{' + k + '}').join(String(vars[k])); });
    }
    return s;
  }
  function has(key) { return Object.prototype.hasOwnProperty.call(T, key); }
  // What the product says reaches the page as data, {code, params}; the words are the
  // message catalogue's (internal/msg, in boot.i18n with the page's own). A template names
  // its params, {name}; {name:kind} reads the value through the catalogue ("status.FAILED";
  // {name:error,problem} tries "error.<value>", then "problem.<value>"),
  // or, when the catalogue has no such entry, shows the param named after the bar
  // ({code:error|error}) or the value itself; {name:kind*} reads each of a list's items
  // (separated by spaces) so and joins them with "list.sep". fill returns null when a param
  // is missing.
  var placeholder = /\{([a-z_0-9]+)(?::([a-z_,]+)(\*)?(?:\|([a-z_0-9]+))?)?\}/g;
  function fill(tmpl, params) {
    var missing = false;
    function read(kind, v) {
      var kinds = kind.split(',');
      for (var i = 0; i < kinds.length; i++) {
        if (!has(kinds[i] + '.' + v)) continue;
        var inner = fill(T[kinds[i] + '.' + v], params);
        if (inner === null) missing = true;
        return inner;
      }
      return null;
    }
    var out = tmpl.replace(placeholder, function (ph, name, kind, list, fb) {
      if (!params || !Object.prototype.hasOwnProperty.call(params, name)) { missing = true; return ph; }
      var v = String(params[name]);
      if (!kind) return v;
      if (list) {
        return v.split(' ').filter(Boolean).map(function (item) {
          var r = read(kind, item);
          return r === null ? item : r;
        }).join(t('list.sep'));
      }
      var r = read(kind, v);
      if (r !== null || missing) return r;
      if (fb && Object.prototype.hasOwnProperty.call(params, fb)) return String(params[fb]);
      return v;
    });
    return missing ? null : out;
  }
  // say is the message code with params in the page's language; english is the server's own
  // text, shown for a code this page does not know (a line written before codes were kept).
  // Text from users and from the data (ids, titles, file names, owners, workers, the
  // values a message names) is marked, so a check for words left untranslated passes over
  // it: data-user on an element that shows only such text, data-values (a JSON list) on
  // one that says a message with them.
  function values(e, params, english) {
    var v = [];
    Object.keys(params || {}).forEach(function (k) {
      // The server's own words stand in for a message only where the page has none.
      if (k !== 'error' && k !== 'then' && k !== 'text') v.push(String(params[k]));
    });
    setAttr(e, 'data-values', v.length ? JSON.stringify(v) : null);
    return e;
  }
  function say(code, params, english) {
    if (code && has(code)) {
      var s = fill(T[code], params || {});
      if (s !== null) return s;
    }
    return english || '';
  }
  // titleOf is what task v is called in the page's language: the title the product gave it,
  // from its message, else the submitter's own words as they wrote them.
  function titleOf(v) {
    var m = v.title_message;
    return m ? say(m.code, m.params, v.title) : v.title;
  }
  // showTitle writes v's title into e. The submitter's own is user data (data-user); the
  // product's is the page's words, with the values it names (data-values).
  function showTitle(e, v) {
    var m = v.title_message;
    setText(e, titleOf(v));
    setAttr(e, 'data-user', m ? null : '');
    return values(e, m && m.params);
  }
  function $(sel, root) { return (root || document).querySelector(sel); }
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) return;
        if (k === 'text') e.textContent = v;
        else if (k === 'class') e.className = v;
        else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : v);
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === undefined || c === null || c === false) continue;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }

  // Live updates change the page in place: an element that stays is kept, and only what
  // differs is written. A button that is replaced under the pointer loses the click that
  // was in progress and the keyboard focus, and a node rewritten with the same text is
  // announced again by a screen reader.
  function setText(e, s) {
    s = String(s);
    if (e.nodeType === 3) { if (e.nodeValue !== s) e.nodeValue = s; } else if (e.textContent !== s) e.textContent = s;
    return e;
  }
  // setAttr sets an attribute, or removes it when v is null or undefined.
  function setAttr(e, k, v) {
    if (v === null || v === undefined) { if (e.hasAttribute(k)) e.removeAttribute(k); } else if (e.getAttribute(k) !== String(v)) e.setAttribute(k, String(v));
    return e;
  }
  function setClass(e, c) { if (e.className !== c) e.className = c; return e; }
  function show(e, on) { if (e.hidden === !!on) e.hidden = !on; return e; }
  // place puts child into parent right after prev (first when prev is null). A child that
  // is there already is not moved: moving an element takes the focus away from it.
  function place(parent, child, prev) {
    var at = prev ? prev.nextSibling : parent.firstChild;
    if (at !== child) parent.insertBefore(child, at);
    return child;
  }
  function drop(e) { if (e && e.parentNode) e.parentNode.removeChild(e); }
  // fillList makes parent's element children the n items of a list: fill(i, shown) updates
  // the element shown for item i (null when there is none yet) and returns it, or returns
  // a new one when the shown one cannot show the item; elements beyond n are removed.
  function fillList(parent, n, fill) {
    for (var i = 0; i < n; i++) {
      var shown = parent.children[i] || null;
      var e = fill(i, shown);
      if (e === shown) continue;
      if (shown) parent.replaceChild(e, shown); else parent.appendChild(e);
    }
    while (parent.children.length > n) parent.removeChild(parent.lastElementChild);
  }

  // ---- the API ---------------------------------------------------------------------------
  // Once the person signs out, the page asks the API nothing more: a poll or a live update's
  // reload due in the moment before the browser leaves would only be refused (401).
  var signingOut = false;
  document.addEventListener('submit', function (e) {
    if (/\/logout$/.test(e.target.getAttribute('action') || '')) signingOut = true;
  }, true);
  function api(method, path, body, extra) {
    if (signingOut) return new Promise(function () {}); // the page is leaving: nothing answers
    var headers = { 'Accept': 'application/json' };
    if (extra) Object.keys(extra).forEach(function (k) { headers[k] = extra[k]; });
    var opts = { method: method, headers: headers, credentials: 'same-origin' };
    if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = boot.csrf;
    if (body instanceof FormData) opts.body = body;
    else if (body !== undefined) { opts.body = JSON.stringify(body); headers['Content-Type'] = 'application/json'; }
    return fetch(path, opts).then(function (res) {
      var ct = res.headers.get('Content-Type') || '';
      var parse = ct.indexOf('json') >= 0 && method !== 'HEAD' ? res.json().catch(function () { return null; }) : Promise.resolve(null);
      return parse.then(function (data) {
        if (res.status === 401) {
          location.href = '/login?next=' + encodeURIComponent(location.pathname);
        }
        return { status: res.status, ok: res.ok, data: data };
      });
    }, function () {
      return { status: 0, ok: false, data: null };
    });
  }

  // problemText says what a problem+json answer means, in the page's language.
  function problemText(r) {
    var p = r.data || {};
    if (r.status === 0) return t('err.network');
    if (p.code && has('problem.' + p.code) && (zh || !p.detail)) return say('problem.' + p.code, p.params, p.detail);
    return p.detail || t('err.generic', { status: r.status });
  }
  function problemBlock(r) {
    var p = r.data || {};
    // The server's own words (English) are on hover.
    var box = el('div', null, el('p', { text: problemText(r), title: p.detail || null }));
    if (p.errors && p.errors.length) {
      var ul = el('ul');
      p.errors.forEach(function (fe) { ul.appendChild(fieldErrorItem(fe)); });
      box.appendChild(ul);
    }
    return box;
  }

  // fieldErrorItem is one field of a refused request and what is wrong with it (a message,
  // {code, params}), in the page's language: a filter's field by the form's label for it,
  // another by the name the API gives it (a value, as the person sent it).
  function fieldErrorItem(fe) {
    var field = String(fe.field || ''), filter = field.indexOf('filter.') === 0 ? filterLabels[field.slice(7)] : null;
    var name = filter ? t(filter) : field;
    var what = say(fe.code, fe.params, fe.message);
    var li = values(el('li', { text: say('field_error.at', { field: name, what: what }, name + ': ' + what) }), fe.params);
    if (!filter && field) {
      var v = JSON.parse(li.getAttribute('data-values') || '[]');
      v.push(field);
      setAttr(li, 'data-values', JSON.stringify(v));
    }
    return li;
  }

  // nothingRemoved says why a replace removed no customer, in the page's language (the
  // server's English for a result kept before it was a message).
  function nothingRemoved(r) {
    var m = r.nothing_removed_message;
    return m ? say(m.code, m.params, r.nothing_removed) : r.nothing_removed;
  }

  // ---- words -------------------------------------------------------------------------------
  function statusName(s) { return has('status.' + s) ? t('status.' + s) : s; }
  function typeName(s) { return has('type.' + s) ? t('type.' + s) : s; }
  function terminal(s) { return ['SUCCESS', 'PARTIAL_SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELLED'].indexOf(s) >= 0; }

  function span(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return t('time.s', { n: s });
    var m = Math.floor(s / 60);
    if (m < 60) return t('time.m', { n: m });
    var h = Math.floor(m / 60);
    if (h < 48) return t('time.h', { n: h });
    return t('time.d', { n: Math.floor(h / 24) });
  }
  function age(iso) {
    var ms = Date.now() - Date.parse(iso);
    return ms < 5000 ? t('time.just_now') : t('time.ago', { t: span(ms) });
  }
  function duration(v) {
    if (!v.started_at) return '—';
    var end = v.finished_at ? Date.parse(v.finished_at) : Date.now();
    return span(end - Date.parse(v.started_at));
  }
  // when is a moment in one format for both languages, in the browser's time zone, which it
  // names: 2026-12-02 22:56:03 UTC+8. utc is the same moment in UTC (shown on hover).
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function when(iso) {
    if (!iso) return '—';
    var d = new Date(iso), off = -d.getTimezoneOffset(), a = Math.abs(off);
    var zone = 'UTC' + (off ? (off > 0 ? '+' : '-') + Math.floor(a / 60) + (a % 60 ? ':' + pad(a % 60) : '') : '');
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' ' + zone;
  }
  function utc(iso) { return iso ? new Date(iso).toISOString().replace(/\.\d+Z$/, 'Z').replace('T', ' ') : ''; }

  // rowText is a rejected row's message ({row, parts: [{field, code, params}]}) in the
  // page's language.
  function rowText(rm) {
    var parts = (rm.parts || []).map(function (p) {
      var what = say(p.code, p.params, '');
      return p.field ? say('row.part', { field: p.field, what: what }, p.field + ': ' + what) : what;
    }).join(t('row.sep'));
    return rm.row ? say('row.at', { n: rm.row, what: parts }) : parts;
  }
  // errorText is a task's or an attempt's error in the page's language: its code's message
  // ("error.<code>", or the refusal of the same name for a file the import refused), else
  // the server's words.
  function errorText(code, params, english) {
    if (!zh || !code) return english || code || '';
    if (has('error.' + code)) return say('error.' + code, params, english);
    if (has('problem.' + code)) return say('problem.' + code, params, english);
    return english || code;
  }
  function taskError(v) {
    if (!v.error) return '';
    return errorText(v.error.code, v.error.params, v.error.message);
  }

  // filterParts are an export's filter values as a person reads them, for the task's facts:
  // each labelled ("Status: Failed", so a filter's value never reads as the task's own
  // status), enum values and dates in the page's language.
  var filterLabels = { city: 'export.city', level: 'export.level', code_prefix: 'export.code_prefix', status: 'filter.status',
    type: 'filter.type', owner: 'filter.owner', created_from: 'filter.from', created_to: 'filter.to' };
  function filterParts(f) {
    var parts = [];
    Object.keys(f || {}).forEach(function (k) {
      var val = f[k];
      if (val === null || val === '' || (Array.isArray(val) && !val.length)) return;
      if (Array.isArray(val)) {
        val = val.map(function (x) { return has('status.' + x) ? statusName(x) : has('type.' + x) ? typeName(x) : x; }).join(', ');
      } else if (k === 'level' && has('level.' + val)) val = t('level.' + val);
      else if (k === 'created_from' || k === 'created_to') val = when(val);
      parts.push(filterLabels[k] ? t(filterLabels[k]) + ': ' + val : String(val));
    });
    return parts;
  }

  function percent(v) {
    if (v.status === 'SUCCESS' || v.status === 'PARTIAL_SUCCESS') return 100;
    return Math.max(0, Math.min(100, (v.progress && v.progress.percent) || 0));
  }
  // progressBar, chip and counts make their widget, or update the one given in place.
  function progressBar(v, bar) {
    bar = bar || el('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100' },
      el('div', { class: 'bar' }), el('span', { class: 'pct' }));
    var pct = percent(v);
    bar.classList.toggle('done', pct === 100);
    bar.classList.toggle('bad', v.status === 'FAILED' || v.status === 'TIMEOUT' || v.status === 'CANCELLED');
    setAttr(bar, 'aria-valuenow', pct);
    setAttr(bar, 'aria-label', t('col.progress'));
    var fill = $('.bar', bar);
    if (fill.style.width !== pct + '%') fill.style.width = pct + '%';
    var p = v.progress || {};
    setText($('.pct', bar), pct + '%' + (p.total ? ' · ' + p.current + '/' + p.total : ''));
    return bar;
  }
  function chip(v, c) {
    c = c || el('span');
    setClass(c, 'chip ' + v.status);
    setText(c, statusName(v.status) + (v.cancel_requested && !terminal(v.status) ? ' · ' + t('status.cancel_requested') : ''));
    setAttr(c, 'data-status', v.status);
    return c;
  }
  function counts(v, box) {
    var c = v.counts || {};
    box = box || el('span', { class: 'counts' }, '', ' / ', el('span', { class: 'ok' }), ' / ', el('span', { class: 'bad' }));
    setText(box.firstChild, c.total || 0);
    setText($('.ok', box), c.success || 0);
    setText($('.bad', box), c.failed || 0);
    return box;
  }

  // ---- waiting, speed, result: the figures the API computed (tc shows the same) ------------
  function nth(n) {
    var s = n % 100 >= 11 && n % 100 <= 13 ? 'th' : ({ 1: 'st', 2: 'nd', 3: 'rd' })[n % 10] || 'th';
    return n + s;
  }
  // waitText is a waiting task's place in its queue and expected start, "3rd in line · starts
  // in ~2 min"; '' for a task that is not waiting.
  function waitText(v) {
    var w = v.wait;
    if (!w || terminal(v.status) || v.status === 'RUNNING') return '';
    var start = !w.expected_start ? t('wait.unknown')
      : Date.parse(w.expected_start) - Date.now() < 5000 ? t('wait.starting')
        : t('wait.starts_in', { t: span(Date.parse(w.expected_start) - Date.now()) });
    return t('wait.position', { n: w.position, nth: nth(w.position) }) + ' · ' + start;
  }
  // speedText is a running task's rows/s and time left, "1,200 rows/s · done in ~3 min".
  function speedText(v) {
    var p = v.progress || {};
    if (v.status !== 'RUNNING' || !(p.rate_per_s > 0)) return '';
    var out = t('speed.rate', { n: Math.round(p.rate_per_s).toLocaleString() });
    if (p.eta) out += ' · ' + t('speed.eta', { t: span(Math.max(0, Date.parse(p.eta) - Date.now())) });
    return out;
  }
  function size(n) {
    var units = ['B', 'KB', 'MB', 'GB'], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
  }
  // resultText is a finished task's result file: its name, size and rows, and until when it
  // may be downloaded.
  // changesText is what an import did to the customers (a dry run: would do): inserted,
  // updated, unchanged, and removed by a replace.
  function changesText(v) {
    var s = v.result && v.result.summary;
    if (!s || !terminal(v.status) || v.type !== 'import:customers') return '';
    var parts = ['inserted', 'updated', 'unchanged'].map(function (k) { return t('import_split.' + k, { n: (s[k] || 0).toLocaleString() }); });
    if ((v.params || {}).mode === 'replace' && !v.result.nothing_removed) parts.push(t('import_split.removed', { n: (s.removed || 0).toLocaleString() }));
    var list = parts.join(' · ');
    return v.result.dry_run ? t('import_split.would', { list: list }) : list;
  }
  function resultText(v) {
    var r = v.result;
    if (!r || !terminal(v.status)) return '';
    var parts = [];
    if (r.name) parts.push(r.name);
    if (r.size) parts.push(t('result.size', { size: size(r.size) }));
    if (r.rows) parts.push(t('result.rows', { n: r.rows.toLocaleString() }));
    if (r.expired) parts.push(t('result.expired'));
    else if (r.expires_at && (v.links.result || v.links.error_report)) parts.push(t('result.until', { date: when(r.expires_at) }));
    return parts.join(' · ');
  }

  // ---- live events -----------------------------------------------------------------------
  // follow opens an EventSource and calls onEvent(kind, view); when streams are refused or
  // keep failing it calls fallback() once (the page then polls).
  function follow(url, onEvent, fallback, onState) {
    if (!window.EventSource) { fallback(); return null; }
    var es = new EventSource(url);
    var failures = 0;
    es.addEventListener('open', function () { failures = 0; if (onState) onState(true); });
    ['status', 'progress'].forEach(function (kind) {
      es.addEventListener(kind, function (e) {
        var v;
        try { v = JSON.parse(e.data); } catch (err) { return; }
        onEvent(kind, v);
      });
    });
    es.addEventListener('error', function () {
      if (onState) onState(false);
      failures++;
      if (es.readyState === EventSource.CLOSED || failures >= 3) {
        es.close();
        fallback();
      }
    });
    return es;
  }

  // ---- My tasks ----------------------------------------------------------------------------
  // The list finds and acts through the API alone. The search, the filters, the status tab,
  // the sort and the page size live in the address (dates as the date inputs show them), so
  // a reload or the language switch keeps them; the status tabs show the answer's counts;
  // the ticked tasks are cancelled or retried by one bulk request whose answer says what
  // happened to each.
  function listPage() {
    var form = $('#filters');
    var tbody = $('#tasks tbody');
    var msg = $('#list-msg');
    var live = $('#live');
    var tabs = $('#status-tabs');
    var answerBox = $('#bulk-answer');
    var selectAll = $('#select-all');
    var fields = ['q', 'type', 'owner', 'created_from', 'created_to', 'sort', 'limit'];
    var statuses = Array.prototype.map.call(tabs.querySelectorAll('button'), function (b) { return b.getAttribute('data-status'); });
    var rows = {};        // id → {tr, view, pick, …}
    var selected = {};    // id → true: the ticked tasks of this page
    var stack = [];       // [cursor, at] of the pages before this one
    var cursor = '';
    var at = 0;           // how many tasks come before this page
    var shown = 0;        // how many this page shows
    var next = '';
    var status = '';      // the status tab
    var busy = false;     // a bulk action is under way
    var seq = 0;          // the latest load: an answer to an older one is dropped
    var polling = null;
    var refreshTimer = null;

    var initial = new URLSearchParams(location.search);
    fields.forEach(function (n) {
      var f = form.elements[n];
      if (f && initial.has(n)) f.value = initial.get(n);
    });
    // A value the selects do not offer (an old or edited address) leaves them on no option.
    if (!form.elements.sort.value) form.elements.sort.value = 'created';
    if (!form.elements.limit.value) form.elements.limit.value = '20';
    status = statuses.indexOf(initial.get('status') || '') >= 0 ? initial.get('status') || '' : '';
    cursor = initial.get('cursor') || '';
    at = cursor ? Math.max(0, parseInt(initial.get('at'), 10) || 0) : 0;

    // state is the page's values as the address keeps them; defaults are left out.
    function state() {
      var s = new URLSearchParams();
      fields.forEach(function (n) {
        var f = form.elements[n];
        var v = f ? f.value.trim() : '';
        if (!v || (n === 'sort' && v === 'created') || (n === 'limit' && v === '20')) return;
        s.set(n, v);
      });
      if (status) s.set('status', status);
      return s;
    }
    function pageSize() { return parseInt(form.elements.limit.value, 10) || 20; }
    // query is the API's query for the page's values.
    function query() {
      var q = new URLSearchParams();
      state().forEach(function (v, k) {
        if (k === 'created_from') v = new Date(v + 'T00:00:00').toISOString().replace(/\.\d+Z$/, 'Z');
        else if (k === 'created_to') v = new Date(v + 'T23:59:59').toISOString().replace(/\.\d+Z$/, 'Z');
        q.set(k, v);
      });
      q.set('limit', String(pageSize()));
      if (cursor) q.set('cursor', cursor);
      return q;
    }

    // row makes a task's row once, keeping the parts a live update changes.
    function row(v) {
      var r = { view: null };
      r.pick = el('input', { type: 'checkbox', class: 'pick', onchange: function () { pick(v.id, r.pick.checked); } });
      r.link = el('a', { class: 'title' });
      r.type = document.createTextNode('');
      r.chip = chip(v);
      r.wait = el('span', { class: 'sub wait' });
      r.bar = progressBar(v);
      r.counts = counts(v);
      r.age = el('td', { 'data-label': t('col.age'), class: 'age' });
      r.duration = el('td', { 'data-label': t('col.duration'), class: 'duration' });
      r.tr = el('tr', { 'data-id': v.id }, el('td', { class: 'w-pick' }, r.pick),
        el('td', { 'data-label': t('col.task') }, r.link, el('span', { class: 'sub' }, r.type, el('span', { class: 'mono', 'data-user': '', text: v.id }))));
      if (boot.admin) r.tr.appendChild(r.owner = el('td', { 'data-label': t('col.owner'), 'data-user': '' }));
      r.tr.appendChild(el('td', { 'data-label': t('col.status') }, r.chip, r.wait));
      r.tr.appendChild(el('td', { 'data-label': t('col.progress') }, r.bar));
      r.tr.appendChild(el('td', { 'data-label': t('col.counts') }, r.counts));
      r.tr.appendChild(r.age);
      r.tr.appendChild(r.duration);
      return r;
    }
    // update shows v in its row (made when the task has none yet) and returns the row; an
    // older view arriving late is ignored unless fresh says it is the server's answer now.
    function update(v, fresh) {
      var r = rows[v.id];
      if (r && r.view) {
        if (!fresh && Date.parse(r.view.updated_at) > Date.parse(v.updated_at) && r.view.status !== v.status && terminal(r.view.status)) {
          return r;
        }
        v = keepProgress(r.view, v);
      }
      if (!r) r = rows[v.id] = row(v);
      r.view = v;
      setAttr(r.link, 'href', '/tasks/' + encodeURIComponent(v.id));
      // The title is the API's (the task type's own message, set at submit), in the page's
      // language as every other surface says it; the search matches its English and the
      // values it names (a city, a file).
      showTitle(r.link, v);
      setAttr(r.pick, 'aria-label', t('bulk.select', { title: titleOf(v) }));
      values(r.pick, v.title_message ? v.title_message.params : { title: v.title });
      setText(r.type, typeName(v.type) + ' · ');
      if (r.owner) setText(r.owner, v.owner);
      chip(v, r.chip);
      // A live event without a place in line (a progress event) keeps the last one shown.
      if (v.wait || v.status !== r.waitStatus) setText(r.wait, waitText(v));
      r.waitStatus = v.status;
      show(r.wait, r.wait.textContent !== '');
      progressBar(v, r.bar);
      counts(v, r.counts);
      setAttr(r.age, 'title', when(v.created_at));
      setText(r.age, age(v.created_at));
      setText(r.duration, duration(v));
      setAttr(r.tr, 'data-status', v.status);
      return r;
    }

    // ---- selection and the bulk actions ----
    function pick(id, on) {
      if (on) selected[id] = true; else delete selected[id];
      showSelection();
    }
    // picked lists the ticked tasks in the order the page shows them.
    function picked() {
      return Array.prototype.map.call(tbody.children, function (tr) { return tr.getAttribute('data-id'); })
        .filter(function (id) { return selected[id]; });
    }
    function showSelection() {
      var ids = Object.keys(rows), n = 0;
      ids.forEach(function (id) {
        var on = !!selected[id];
        if (rows[id].pick.checked !== on) rows[id].pick.checked = on;
        if (on) n++;
      });
      selectAll.checked = n > 0 && n === ids.length;
      selectAll.indeterminate = n > 0 && n < ids.length;
      selectAll.disabled = ids.length === 0;
      setText($('#selected-count'), n ? t('bulk.selected', { n: n }) : '');
      $('#cancel-selected').disabled = busy || n === 0;
      $('#retry-selected').disabled = busy || n === 0;
    }
    selectAll.addEventListener('change', function () {
      Object.keys(rows).forEach(function (id) { if (selectAll.checked) selected[id] = true; else delete selected[id]; });
      showSelection();
    });
    // reason says why a task was not acted on, in the page's language (the server's own
    // words, in English, in the item's title).
    function reason(action, res) {
      if (!zh) return res.message || res.code;
      var r = rows[res.id], v = r && r.view;
      if (res.code === 'status_conflict' && v) {
        if (action === 'retry' && v.error && v.error.code === 'all_rows_rejected') return t('bulk.all_rows_rejected');
        return t('bulk.status_refuses', { status: statusName(v.status) });
      }
      return say('problem.' + res.code, res.params, res.message || res.code);
    }
    function showAnswer(action, results) {
      var done = results.filter(function (res) { return res.outcome === 'done'; }).length;
      clear(answerBox);
      answerBox.className = 'answer' + (done < results.length ? ' bad' : '');
      setAttr(answerBox, 'data-action', action);
      answerBox.appendChild(el('p', { text: t('bulk.' + action + '_done', { done: done, n: results.length }) }));
      var ul = el('ul', { id: 'bulk-results' });
      results.forEach(function (res) {
        var r = rows[res.id], what;
        if (res.outcome === 'done') {
          var v = res.task || {};
          what = statusName(v.status) + (v.cancel_requested && !terminal(v.status) ? ' · ' + t('status.cancel_requested') : '');
        } else if (res.outcome === 'not_found') {
          what = t('bulk.not_found');
        } else {
          what = t(res.outcome === 'not_allowed' ? 'bulk.not_allowed' : 'bulk.error') + ': ' + reason(action, res);
        }
        ul.appendChild(el('li', { 'data-id': res.id, 'data-outcome': res.outcome, title: res.message || null },
          r ? showTitle(el('a', { href: '/tasks/' + encodeURIComponent(res.id) }), r.view)
            : el('a', { href: '/tasks/' + encodeURIComponent(res.id), 'data-user': '', text: res.id }), ' — ' + what));
      });
      answerBox.appendChild(ul);
    }
    function act(action) {
      var ids = picked();
      if (!ids.length || busy) return;
      busy = true;
      showSelection();
      clear(answerBox);
      answerBox.className = 'answer';
      setText(answerBox, t('bulk.working', { n: ids.length }));
      api('POST', '/api/v1/tasks/' + action, { ids: ids }).then(function (r) {
        busy = false;
        if (!r.ok) {
          clear(answerBox);
          answerBox.className = 'answer bad';
          answerBox.appendChild(problemBlock(r));
          showSelection();
          return;
        }
        showAnswer(action, r.data.results);
        r.data.results.forEach(function (res) { if (res.task && rows[res.id]) update(res.task, true); });
        selected = {};
        load(); // the counts, and the tasks that left this tab
      });
    }
    $('#cancel-selected').addEventListener('click', function () { act('cancel'); });
    $('#retry-selected').addEventListener('click', function () { act('retry'); });

    // ---- the page of tasks ----
    function showTabs(counts) {
      var all = 0;
      if (counts) Object.keys(counts).forEach(function (k) { all += counts[k]; });
      Array.prototype.forEach.call(tabs.querySelectorAll('button'), function (b) {
        var st = b.getAttribute('data-status');
        setAttr(b, 'aria-pressed', st === status ? 'true' : 'false');
        if (counts) setText($('.n', b), st ? counts[st] || 0 : all);
      });
    }
    function load() {
      var mine = ++seq;
      var s = state();
      if (cursor) {
        s.set('cursor', cursor);
        if (at) s.set('at', String(at));
      }
      var qs = s.toString();
      history.replaceState(null, '', qs ? '?' + qs : location.pathname);
      // The language switch keeps what the page shows.
      setAttr($('#lang-switch'), 'href', '?' + (qs ? qs + '&' : '') + 'lang=' + (zh ? 'en' : 'zh'));
      showTabs(null);
      if (!tbody.firstChild) msg.textContent = t('list.loading');
      return api('GET', '/api/v1/tasks?' + query().toString()).then(function (r) {
        if (mine !== seq) return; // a newer load is under way
        if (!r.ok) { msg.textContent = problemText(r); return; }
        var d = r.data;
        if (!d.items.length && cursor) { toFirstPage(); return; } // the tasks of this page have gone
        // The page's tasks in the answer's order: the rows shown already are kept (and
        // moved only when their place changed), the others made, the rest removed.
        var keep = {}, prev = null;
        d.items.forEach(function (v) {
          keep[v.id] = true;
          var r = rows[v.id];
          prev = place(tbody, (r && r.view && older(r.view, v) ? r : update(v, true)).tr, prev);
        });
        Object.keys(rows).forEach(function (id) { if (!keep[id]) { drop(rows[id].tr); delete rows[id]; } });
        Object.keys(selected).forEach(function (id) { if (!keep[id]) delete selected[id]; });
        shown = d.items.length;
        next = d.next_cursor || '';
        emptyState(msg, shown);
        showTabs(d.counts);
        setText($('#range'), shown ? t('find.range', { from: at + 1, to: at + shown, total: d.total }) : '');
        setAttr($('#range'), 'data-total', d.total);
        $('#next').disabled = !next;
        $('#prev').disabled = stack.length === 0 && !cursor;
        showSelection();
      });
    }
    // older: v, read from the list, is older than what its row shows already (a live event
    // came while the read was under way); the row keeps the newer view.
    function older(shown, v) {
      return Date.parse(shown.updated_at) > Date.parse(v.updated_at);
    }
    // keepProgress is v with the progress and counts of shown when shown is further along in
    // the same running attempt, where progress only grows. A list read and the live events
    // read a running task's progress apart: a read can see progress that a live event still on
    // its way had not, and a list read's row can be newer than its progress.
    function keepProgress(shown, v) {
      var ahead = ((shown.progress || {}).current || 0) > ((v.progress || {}).current || 0);
      if (!ahead || shown.status !== 'RUNNING' || v.status !== 'RUNNING' || shown.attempt !== v.attempt) return v;
      return Object.assign({}, v, { progress: shown.progress, counts: shown.counts });
    }
    function toFirstPage() {
      stack = []; cursor = ''; at = 0; selected = {};
      return load();
    }
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      toFirstPage(); restartStream();
    });
    form.addEventListener('reset', function () {
      setTimeout(function () { status = ''; toFirstPage(); restartStream(); }, 0);
    });
    ['sort', 'limit'].forEach(function (n) { form.elements[n].addEventListener('change', toFirstPage); });
    var typing = null;
    form.elements.q.addEventListener('input', function () {
      clearTimeout(typing);
      typing = setTimeout(toFirstPage, 300);
    });
    tabs.addEventListener('click', function (e) {
      var b = e.target.closest('button');
      if (!b) return;
      status = b.getAttribute('data-status');
      toFirstPage();
    });
    $('#next').addEventListener('click', function () {
      if (!next) return;
      stack.push([cursor, at]);
      at += shown; cursor = next; selected = {};
      load();
    });
    $('#prev').addEventListener('click', function () {
      var p = stack.pop() || ['', 0];
      cursor = p[0]; at = p[1]; selected = {};
      load();
    });

    // ---- live ----
    var es = null;
    // A shown task changes in place; any change of status may move tasks between tabs or
    // pages, so the page is read again, at most once a second.
    function onEvent(kind, v) {
      if (rows[v.id]) update(v, false);
      if (kind === 'status') refreshSoon();
    }
    function refreshSoon() {
      if (refreshTimer || polling) return;
      refreshTimer = setTimeout(function () { refreshTimer = null; load(); }, 1000);
    }
    function setLive(on) {
      live.classList.toggle('on', on);
      setText(live, on ? t('list.live') : '');
    }
    function poll() {
      if (polling) return;
      live.textContent = t('list.polling');
      polling = setInterval(load, 3000);
    }
    function restartStream() {
      if (es) es.close();
      if (polling) return;
      var owner = boot.admin && form.elements.owner ? form.elements.owner.value.trim() : '';
      es = follow('/api/v1/events' + (owner ? '?owner=' + encodeURIComponent(owner) : ''), onEvent, poll, setLive);
    }
    // Streaming first, then the page: a change between the two is not missed.
    restartStream();
    load();
    setInterval(function () {
      Object.keys(rows).forEach(function (id) {
        var r = rows[id];
        setText(r.age, age(r.view.created_at));
        setText(r.duration, duration(r.view));
      });
    }, 5000);
  }

  // emptyState says why the list is empty and offers the next step: with filters, to reset
  // them; without, to start the first import or export.
  function emptyState(msg, shown) {
    clear(msg);
    if (shown) return;
    var filtered = /[?&](q|status|type|owner|created_from|created_to)=[^&]/.test(location.search);
    msg.appendChild(document.createTextNode(t(filtered ? 'list.empty' : 'list.none') + ' '));
    if (filtered) {
      msg.appendChild(el('a', { href: '/', id: 'empty-reset', text: t('filter.reset') }));
      return;
    }
    msg.appendChild(el('a', { href: '/new/import', id: 'empty-import', class: 'button primary', text: t('nav.import') }));
    msg.appendChild(document.createTextNode(' '));
    msg.appendChild(el('a', { href: '/new/export', id: 'empty-export', class: 'button', text: t('nav.export') }));
  }

  // ---- Task detail -------------------------------------------------------------------------
  function detailPage() {
    var id = boot.task;
    var box = $('#detail');
    var msg = $('#detail-msg');
    var actionMsg = $('#action-msg');
    var view = null;
    var es = null;
    $('#copy-id').addEventListener('click', function () {
      var btn = this;
      function done() {
        setText(btn, t('detail.copied'));
        setTimeout(function () { setText(btn, t('detail.copy_id')); }, 1500);
      }
      function bySelection() { // the clipboard API needs https (or localhost)
        var r = document.createRange();
        r.selectNodeContents($('#task-no'));
        getSelection().removeAllRanges();
        getSelection().addRange(r);
        if (document.execCommand('copy')) done();
      }
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(id).then(done, bySelection);
      else bySelection();
    });
    var polling = null;
    var reloadTimer = null;

    function notFound() {
      box.hidden = true;
      $('#not-found-title').hidden = false;
      ['#rejected', '#attempts', '#logs'].forEach(function (s) { $(s).hidden = true; });
      msg.textContent = t('detail.not_found');
      values(msg, { id: id || '' }); // the id asked for, in the window's title
      msg.className = 'msg error';
      msg.setAttribute('data-state', 'not-found');
    }
    var facts = {}; // key → {dt, dd}: each fact's pair, made once
    // renderFacts shows the facts that have a value, in their order, each in its own pair.
    function renderFacts(v) {
      var dl = $('#task-facts'), p = v.params || {}, prev = null;
      [
        ['owner', t('col.owner'), boot.admin ? v.owner : ''],
        ['file', t('detail.file'), p.filename],
        ['mode', t('detail.mode'), p.mode && (has('mode.' + p.mode) ? t('mode.' + p.mode) : p.mode)],
        ['filter', t('detail.filter'), filterParts(p.filter).join(' · ')],
        ['wait', t('detail.wait'), waitText(v)],
        ['speed', t('detail.speed'), speedText(v)],
        ['dry_run', t('detail.dry_run'), v.result && v.result.dry_run ? t('detail.dry_run_note') : ''],
        ['result', t('detail.result'), resultText(v), v.result && v.result.expires_at ? utc(v.result.expires_at) : ''],
        ['changes', t('detail.changes'), changesText(v)],
        ['removed', t('detail.removed'), v.result && nothingRemoved(v.result)],
        ['counts', t('detail.counts'), v],
        ['created', t('detail.created'), when(v.created_at), utc(v.created_at)],
        ['started', t('detail.started'), when(v.started_at), utc(v.started_at)],
        ['finished', t('detail.finished'), when(v.finished_at), utc(v.finished_at)],
        ['duration', t('col.duration'), duration(v)]
      ].forEach(function (f) {
        var key = f[0], value = f[2], pair = facts[key];
        if (value === undefined || value === null || value === '') {
          if (pair) { drop(pair.dt); drop(pair.dd); delete facts[key]; }
          return;
        }
        if (!pair) pair = facts[key] = { dt: el('dt'), dd: el('dd', { 'data-fact': key }, key === 'counts' ? counts(v) : null) };
        setText(pair.dt, f[1]);
        if (key === 'counts') counts(v, pair.dd.firstChild); else setText(pair.dd, value);
        if (key === 'owner' || key === 'file') setAttr(pair.dd, 'data-user', '');
        if (key === 'filter') values(pair.dd, (v.params || {}).filter);
        if (key === 'result') values(pair.dd, { name: (v.result || {}).name || '' });
        if (f[3]) setAttr(pair.dd, 'title', f[3]); // a moment's UTC form, on hover
        place(dl, pair.dt, prev);
        prev = place(dl, pair.dd, pair.dt);
      });
    }
    function renderHead(v) {
      // A message about what was done (cancel requested, a refusal) belongs to the status
      // it was said in: the next status clears it.
      if (view && view.status !== v.status) setText(actionMsg, '');
      view = v;
      show(box, true);
      setText(msg, '');
      var title = titleOf(v);
      showTitle($('#task-title'), v);
      if (document.title !== title + ' · taskcenter') document.title = title + ' · taskcenter';
      chip(v, $('#task-status'));
      setText($('#task-no'), v.id);
      setText($('#task-type'), '· ' + typeName(v.type));
      progressBar(v, $('#task-progress'));
      renderFacts(v);
      var err = $('#task-error');
      show(err, !!v.error);
      setText(err, v.error ? t('detail.error') + t('punct.colon') + taskError(v) : '');
      values(err, v.error && v.error.params);
      setAttr(err, 'title', zh && v.error ? v.error.message : null);
      renderCancelledBy(v, v.status);
      renderActions(v);
      renderMapping(v);
      var fe = (v.result && v.result.first_errors) || [];
      var fem = (v.result && v.result.first_error_messages) || [];
      show($('#rejected-rows-title'), fe.length > 0);
      show($('#rejected'), fe.length > 0 || breakdown.length > 0);
      fillList($('#rejected-rows'), fe.length, function (i, li) {
        li = li || el('li');
        setText(li, zh && fem[i] ? rowText(fem[i]) : fe[i]);
        var vals = {};
        (fem[i] ? fem[i].parts : []).forEach(function (p, j) { Object.keys(p.params || {}).forEach(function (k) { vals[j + k] = p.params[k]; }); });
        values(li, vals);
        setAttr(li, 'title', fe[i]);
        return li;
      });
    }
    // renderMapping offers, once, the mapping form of an import that failed on headers it
    // does not know: the choice re-submits the task's stored upload with the mapping.
    var mappingFor = '';
    function renderMapping(v) {
      var d = v.error && v.error.details;
      var offered = v.status === 'FAILED' && v.type === 'import:customers' && d && (d.missing_fields || []).length > 0;
      if (!offered) { show($('#mapping'), false); mappingFor = ''; return; }
      if (mappingFor === v.id) return;
      mappingFor = v.id;
      mappingForm($('#mapping'), d, function (columns) { return resubmit(v.id, { columns: columns }); });
    }
    // renderCancelledBy says who cancelled the task (or asked to), from the detail's audit;
    // status is the one the page shows.
    function renderCancelledBy(v, status) {
      if (!('cancelled_by' in v) && v.cancel_requested) return; // live updates carry no audit: keep what the detail said
      var by = $('#task-cancelled-by'), c = v.cancelled_by;
      show(by, !!c);
      values(by, { who: c ? c.actor : '' });
      setText(by, c ? t(status === 'CANCELLED' ? 'detail.cancelled_by' : 'detail.cancel_requested_by')
        .replace('{who}', c.actor).replace('{at}', when(c.at)) : '');
    }
    // attemptItem shows an attempt in the timeline's item li, made when li is null or is
    // the "no attempts" line.
    function attemptItem(a, li) {
      if (!li || !li._attempt) {
        li = el('li');
        li._attempt = { strong: el('strong'), trigger: document.createTextNode(''), chip: el('span'), hint: el('div', { class: 'hint' }), error: null };
        li.appendChild(li._attempt.strong);
        li.appendChild(document.createTextNode(' · '));
        li.appendChild(li._attempt.trigger);
        li.appendChild(document.createTextNode(' · '));
        li.appendChild(li._attempt.chip);
        li.appendChild(li._attempt.hint);
      }
      var p = li._attempt;
      setText(p.strong, t('detail.attempt') + ' ' + a.attempt);
      setText(p.trigger, has('trigger.' + a.trigger) ? t('trigger.' + a.trigger) : a.trigger);
      setClass(p.chip, 'chip ' + a.status);
      setText(p.chip, statusName(a.status));
      values(p.hint, { worker: a.worker || '' });
      setText(p.hint, t('detail.worker') + ': ' + (a.worker || '—') + ' · ' + t('detail.start') + ': ' + when(a.started_at) +
        ' · ' + t('detail.end') + ': ' + when(a.finished_at));
      if (a.error) {
        p.error = p.error || li.appendChild(el('div', { class: 'error' }));
        setText(p.error, errorText(a.error_code, a.error_params, a.error));
        values(p.error, a.error_params);
        setAttr(p.error, 'title', zh ? a.error : null);
      } else if (p.error) {
        drop(p.error);
        p.error = null;
      }
      return li;
    }
    function renderMore(v) {
      var attempts = v.attempts || [];
      show($('#attempts'), true);
      if (!attempts.length) {
        fillList($('#timeline'), 1, function (i, li) {
          if (li && !li._attempt) return setText(li, t('detail.no_attempts'));
          return el('li', { text: t('detail.no_attempts') });
        });
      } else {
        fillList($('#timeline'), attempts.length, function (i, li) { return attemptItem(attempts[i], li); });
      }
      renderBreakdown(v.rejected_breakdown || []);
      loadLog();
    }
    // The rejected rows counted by field and, under each field, by reason ("phone 414: must
    // be 11 digits starting with 1 400 · is required 14"), from the detail only: a live
    // event's view has none, and keeps what the detail said.
    var breakdown = [];
    function renderBreakdown(b) {
      breakdown = b;
      show($('#rejected-breakdown'), b.length > 0);
      show($('#rejected'), b.length > 0 || !$('#rejected-rows-title').hidden);
      fillList($('#rejected-fields'), b.length, function (i, li) {
        if (!li) {
          li = el('li', null, el('span', { class: 'field' }), ' ', el('span', { class: 'n' }), el('span', { class: 'colon' }),
            el('ul', { class: 'reasons' }));
        }
        var f = b[i].field, reasons = b[i].reasons || [];
        setAttr(li, 'data-field', f);
        setText($('.field', li), has('field.' + f) ? t('field.' + f) : f);
        setText($('.n', li), String(b[i].count));
        setText($('.colon', li), reasons.length ? t('punct.colon') : '');
        fillList($('.reasons', li), reasons.length, function (j, r) {
          if (!r) r = el('li', null, el('span', { class: 'reason' }), ' ', el('span', { class: 'n' }));
          setAttr(r, 'data-reason', reasons[j].code);
          setText(r.firstChild, reasonText(reasons[j]));
          values(r.firstChild, reasons[j].params);
          setText(r.lastChild, String(reasons[j].count));
          return r;
        });
        return li;
      });
    }
    // reasonText is a reason of the breakdown in the page's language: the message the API
    // says it with (its row message with the params its rows share, or the catalogue's
    // "reason.<name>" when their values differ).
    function reasonText(r) {
      return say(r.says.code, r.says.params) || r.code;
    }
    // The log: the newest lines (GET …/logs), more on "Load earlier lines", grouped under a
    // heading per attempt. The page shows a contiguous run of the newest lines: a reload
    // reads as many as are shown (at most 1000 a page), so earlier pages keep continuing from
    // the cursor of the latest read.
    var logLines = [], logCursor = '', logShown = '';
    function logURL(limit, cursor) {
      return '/api/v1/tasks/' + encodeURIComponent(id) + '/logs?limit=' + limit + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
    }
    function loadLog() {
      var limit = Math.min(1000, Math.max(100, logLines.length));
      return api('GET', logURL(limit)).then(function (r) {
        if (!r.ok || !r.data) return;
        logLines = r.data.items || [];
        logCursor = r.data.next_cursor || '';
        renderLog();
      });
    }
    $('#log-earlier').addEventListener('click', function () {
      var btn = this;
      if (!logCursor) return;
      btn.disabled = true;
      api('GET', logURL(100, logCursor)).then(function (r) {
        btn.disabled = false;
        if (!r.ok || !r.data) { setText(msg, problemText(r)); return; }
        logLines = (r.data.items || []).concat(logLines);
        logCursor = r.data.next_cursor || '';
        renderLog();
      });
    });
    function renderLog() {
      show($('#logs'), logLines.length > 0);
      show($('#log-earlier'), !!logCursor);
      var key = JSON.stringify(logLines);
      if (key === logShown) return; // unchanged: leave the DOM (and any selection) alone
      logShown = key;
      var box = clear($('#log-groups')), list = null, attempt = null;
      logLines.forEach(function (l) {
        if (list === null || l.attempt !== attempt) {
          attempt = l.attempt;
          box.appendChild(el('h3', { class: 'log-attempt', 'data-attempt': String(attempt),
            text: attempt > 0 ? t('detail.attempt') + ' ' + attempt : t('detail.log_no_attempt') }));
          list = box.appendChild(el('ol', { class: 'log' }));
        }
        var level = has('log_level.' + l.level) ? t('log_level.' + l.level) : l.level;
        var li = el('li', { class: 'lvl-' + l.level, 'data-code': l.code || null,
          text: when(l.at) + ' [' + level + '] ' + (zh ? say(l.code, l.params, l.message) : l.message) });
        values(li, l.params);
        setAttr(li, 'title', utc(l.at));
        list.appendChild(li);
      });
    }
    var busy = false; // an action's POST is under way: the action buttons stay disabled
    var links = {};   // the links the action controls act on: the latest view's
    var againOffered = false; // the result answered 410: the export can be run again
    function post(url, then) {
      setText(actionMsg, '');
      busy = true;
      Array.prototype.forEach.call($('#task-actions').querySelectorAll('button'), function (b) { b.disabled = true; });
      api('POST', url).then(function (r) {
        busy = false;
        if (!r.ok) { actionMsg.textContent = problemText(r); load(); return; }
        if (then) then(r);
        load().then(startStream);
      });
    }
    function exportAgain(v) {
      var p = v.params || {};
      api('POST', '/api/v1/exports', { type: v.type.replace(/^export:/, ''), filter: p.filter || {} }).then(function (r) {
        if (!r.ok) { actionMsg.textContent = problemText(r); return; }
        location.href = '/tasks/' + encodeURIComponent(r.data.task.id);
      });
    }
    // download makes a link to a file; renderActions sets (and updates) its href.
    function download(label, cls) {
      var a = el('a', { class: 'button ' + (cls || ''), download: '', text: label });
      a.addEventListener('click', function (e) {
        // Check first: an expired file answers 410, and the page says so instead of
        // navigating to an error.
        if (a.getAttribute('data-checked') === '1') { a.removeAttribute('data-checked'); return; }
        e.preventDefault();
        api('HEAD', a.getAttribute('href')).then(function (r) {
          if (r.status === 410) {
            actionMsg.textContent = t('action.expired');
            againOffered = true;
            if (view) renderActions(view);
            return;
          }
          if (!r.ok) { actionMsg.textContent = problemText(r); return; }
          a.setAttribute('data-checked', '1');
          a.click();
        });
      });
      return a;
    }
    // The action controls, in their order: each is made the first time it is offered, kept
    // (and updated) while it is, and removed once it is not. The handlers act on the links
    // of the latest view, so a control that stays never needs to be made again.
    var actions = [
      { id: 'cancel', offered: function (v, l) { return !!l.cancel; }, make: function () {
        return el('button', { type: 'button', id: 'cancel', class: 'danger', text: t('action.cancel'), onclick: function () {
          // The answer may come after the live stream already showed the task CANCELLED: the
          // message belongs to a task that is still RUNNING, as the page shows it.
          post(links.cancel, function (r) {
            if (r.data && r.data.status === 'RUNNING' && view && view.status === 'RUNNING') actionMsg.textContent = t('action.cancel_requested');
          });
        } });
      } },
      { id: 'retry', offered: function (v, l) { return !!l.retry; }, make: function () {
        return el('button', { type: 'button', id: 'retry', class: 'primary', text: t('action.retry'), onclick: function () { post(links.retry); } });
      } },
      { id: 'undo', offered: function (v, l) { return !!l.undo; }, make: function () {
        return el('button', { type: 'button', id: 'undo', class: 'danger', text: t('action.undo'), onclick: function () {
          if (!window.confirm(t('action.undo_confirm'))) return;
          post(links.undo, function (r) { location.href = '/tasks/' + encodeURIComponent(r.data.task.id); });
        } });
      } },
      { id: 'download', href: 'result', offered: function (v, l) { return !!l.result; }, make: function () {
        var a = download(t('action.download'), 'primary');
        a.id = 'download';
        return a;
      } },
      { id: 'error-report', href: 'error_report', offered: function (v, l) { return !!l.error_report; }, make: function () {
        var a = download(t('action.error_report'));
        a.id = 'error-report';
        return a;
      } },
      // An import refused for its input is not offered a retry (the same file would fail the
      // same way): it is offered the form for a corrected file, beside its error report.
      { id: 'upload-corrected', offered: function (v, l) {
        return v.type === 'import:customers' && !l.retry && (v.status === 'FAILED' || v.status === 'PARTIAL_SUCCESS') &&
          !((v.result && v.result.dry_run) || (v.params && v.params.dry_run));
      }, make: function () {
        return el('a', { class: 'button primary', id: 'upload-corrected', href: '/new/import', text: t('action.upload_corrected') });
      } },
      { id: 'run-for-real', offered: function (v) {
        var dry = (v.result && v.result.dry_run) || (v.params && v.params.dry_run);
        return v.type === 'import:customers' && !!dry && (v.status === 'SUCCESS' || v.status === 'PARTIAL_SUCCESS');
      }, make: function () {
        return el('button', { type: 'button', id: 'run-for-real', class: 'primary', text: t('action.run_for_real'), onclick: function () {
          if (!view) return;
          busy = true;
          resubmit(view.id, { dry_run: false }).then(function (r) {
            busy = false;
            if (!r.ok) actionMsg.textContent = problemText(r);
          });
        } });
      } },
      { id: 'export-again', offered: function (v) {
        return v.type.indexOf('export:') === 0 && (againOffered || !!(v.result && v.result.expired));
      }, make: function () {
        return el('button', { type: 'button', id: 'export-again', text: t('action.export_again'), onclick: function () { if (view) exportAgain(view); } });
      } }
    ];
    function renderActions(v) {
      var box = $('#task-actions'), prev = null;
      links = v.links || {};
      actions.forEach(function (c) {
        if (!c.offered(v, links)) { drop(c.el); c.el = null; return; }
        var e = c.el = c.el || c.make();
        if (c.href) setAttr(e, 'href', links[c.href]);
        if (e.tagName === 'BUTTON' && e.disabled !== busy) e.disabled = busy;
        prev = place(box, e, prev);
      });
    }
    // load reads the task; head false leaves status, counts and progress to the live stream,
    // whose events are newer than an answer that may have been read before them: a page must
    // never step back to a state it has already moved past.
    function load(head) {
      return api('GET', '/api/v1/tasks/' + encodeURIComponent(id)).then(function (r) {
        if (r.status === 404 || r.status === 400) { notFound(); return null; }
        if (!r.ok) { msg.textContent = problemText(r); return null; }
        if (head !== false) renderHead(r.data);
        else renderCancelledBy(r.data, view ? view.status : r.data.status);
        renderMore(r.data);
        return r.data;
      });
    }
    function reloadSoon() {
      clearTimeout(reloadTimer);
      reloadTimer = setTimeout(function () { load(false); }, 150); // attempts and log only
    }
    function poll() {
      if (polling) return;
      polling = setInterval(function () {
        load().then(function (v) { if (!v || terminal(v.status)) { clearInterval(polling); polling = null; } });
      }, 2000);
    }
    function startStream() {
      if (es) { es.close(); es = null; }
      if (!view || terminal(view.status)) return;
      es = follow('/api/v1/tasks/' + encodeURIComponent(id) + '/events', function (kind, v) {
        if (kind === 'progress') { if (view && !terminal(view.status)) renderHead(v); return; }
        renderHead(v);
        reloadSoon(); // attempts and log
        if (terminal(v.status) && es) { es.close(); es = null; }
      }, poll);
    }
    if (!id) { notFound(); return; }
    load().then(function (v) { if (v) startStream(); });
  }

  // ---- Column mapping ----------------------------------------------------------------------
  // mappingForm fills box with a form that maps the file's headers to the required fields
  // the import found no column for (details: the API's HeaderProblem): a select per field,
  // its options the file's headers. send(columns) re-submits with the mapping chosen
  // (header → field) and answers the API's reply; a refusal is shown in the form.
  function mappingForm(box, details, send) {
    var d = details || {};
    var lang = zh ? 'zh' : 'en';
    var missing = d.missing_fields || [];
    var form = el('form', { id: 'mapping-form', novalidate: true });
    form.appendChild(el('h2', { text: t('mapping.title') }));
    if ((d.unknown_headers || []).length) {
      form.appendChild(values(el('p', { class: 'hint', text: t('mapping.unknown', { headers: d.unknown_headers.join(zh ? '、' : ', ') }) }), Object.assign({}, d.unknown_headers)));
    }
    form.appendChild(el('p', { class: 'hint', text: t('mapping.hint') }));
    var selects = {};
    (d.fields || []).forEach(function (f) {
      if (missing.indexOf(f.name) < 0) return;
      var label = (f.labels && (f.labels[lang] || f.labels.en)) || f.name;
      var sel = el('select', { id: 'map-' + f.name, name: f.name, 'data-field': f.name },
        el('option', { value: '', text: t('mapping.choose') }));
      (d.headers || []).forEach(function (h) { sel.appendChild(el('option', { value: h, 'data-user': '', text: h })); });
      form.appendChild(el('label', { for: 'map-' + f.name, text: label }));
      form.appendChild(sel);
      selects[f.name] = sel;
    });
    var btn = el('button', { type: 'submit', class: 'primary', id: 'mapping-submit', text: t('mapping.submit') });
    var msg = el('div', { class: 'msg', id: 'mapping-msg', role: 'status' });
    form.appendChild(btn);
    form.appendChild(msg);
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var columns = {}, used = {}, problem = '';
      Object.keys(selects).forEach(function (name) {
        var h = selects[name].value;
        if (!h) { problem = problem || t('mapping.choose_all'); return; }
        if (used[h]) { problem = problem || t('mapping.twice', { header: h }); return; }
        used[h] = true;
        columns[h] = name;
      });
      clear(msg);
      if (problem) { msg.textContent = problem; return; }
      btn.disabled = true;
      send(columns).then(function (r) {
        btn.disabled = false;
        if (r && !r.ok) msg.appendChild(problemBlock(r));
      });
    });
    clear(box).appendChild(form);
    show(box, true);
  }
  // resubmit imports an earlier import task's stored upload again with other choices (a
  // mapping, a real run after a dry one), and opens the new task: no upload.
  function resubmit(from, choices) {
    var body = { from_task: from, lang: zh ? 'zh' : 'en' };
    Object.keys(choices).forEach(function (k) { body[k] = choices[k]; });
    return api('POST', '/api/v1/imports', body).then(function (r) {
      if (r.ok) location.href = '/tasks/' + encodeURIComponent(r.data.task.id);
      return r;
    });
  }

  // ---- New import --------------------------------------------------------------------------
  function answer(box, r, okText) {
    clear(box);
    box.className = 'answer' + (r.ok ? '' : ' bad');
    if (!r.ok) { box.appendChild(problemBlock(r)); box.setAttribute('data-status', String(r.status)); return; }
    var task = r.data.task;
    box.setAttribute('data-status', String(r.status));
    box.appendChild(el('p', { text: okText(task, r.data.duplicate) }));
    box.appendChild(el('p', null, el('a', { href: '/tasks/' + encodeURIComponent(task.id), id: 'open-task', class: 'button primary', text: t('import.open') })));
    setTimeout(function () { location.href = '/tasks/' + encodeURIComponent(task.id); }, 1200);
  }
  function importPage() {
    var form = $('#import-form');
    var input = $('#file');
    var drop = $('#drop');
    var box = $('#answer');
    function showName() { $('#file-name').textContent = input.files.length ? input.files[0].name : ''; }
    input.addEventListener('change', showName);
    ['dragenter', 'dragover'].forEach(function (n) {
      drop.addEventListener(n, function (e) { e.preventDefault(); drop.classList.add('over'); });
    });
    ['dragleave', 'drop'].forEach(function (n) {
      drop.addEventListener(n, function () { drop.classList.remove('over'); });
    });
    drop.addEventListener('drop', function (e) {
      e.preventDefault();
      if (e.dataTransfer && e.dataTransfer.files.length) { input.files = e.dataTransfer.files; showName(); }
    });
    var mapping = $('#import-mapping');
    // send uploads the chosen file with columns (a mapping, or none); a refusal that names
    // the file's headers offers the mapping form, which sends the same file again with it.
    function send(columns) {
      var fd = new FormData();
      fd.append('file', input.files[0]);
      fd.append('mode', form.elements.mode.value);
      if (form.elements.dry_run.checked) fd.append('dry_run', 'true');
      if (form.elements.sheet.value.trim()) fd.append('sheet', form.elements.sheet.value.trim());
      fd.append('lang', zh ? 'zh' : 'en'); // the error report speaks the page's language
      if (columns) fd.append('columns', JSON.stringify(columns));
      $('#import-submit').disabled = true;
      box.className = 'answer';
      box.textContent = t('import.uploading');
      return api('POST', '/api/v1/imports', fd).then(function (r) {
        $('#import-submit').disabled = false;
        answer(box, r, function (task, dup) { return t(dup ? 'import.duplicate' : 'import.accepted', { id: task.id }); });
        if (!r.ok && r.data && r.data.details) mappingForm(mapping, r.data.details, send);
        else show(mapping, false);
        return r.ok ? r : { ok: true };
      });
    }
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      if (!input.files.length) { box.className = 'answer bad'; box.textContent = t('import.no_file'); return; }
      send(null);
    });
  }

  // ---- New export --------------------------------------------------------------------------
  // submitKey is the Idempotency-Key of one submit of a rendered form: the form's own random
  // part and a digest of what it sends, so a double submit (two clicks, Enter twice, a
  // resend) makes one task, and the same form sent with other values makes another.
  function submitKey(nonce, body) {
    var s = JSON.stringify(body), h1 = 0x811c9dc5, h2 = 0x01000193;
    for (var i = 0; i < s.length; i++) {
      var c = s.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 16777619) >>> 0;
      h2 = Math.imul(h2 ^ c, 2246822519) >>> 0;
    }
    return 'page-' + nonce + '-' + h1.toString(36) + h2.toString(36);
  }
  function formNonce() {
    var b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return (x + 256).toString(16).slice(1); }).join('');
  }
  function exportPage() {
    var form = $('#export-form');
    var box = $('#answer');
    var nonce = formNonce();
    function sync() {
      var tasks = form.elements.type.value === 'tasks';
      $('#f-customers').hidden = tasks;
      $('#f-tasks').hidden = !tasks;
    }
    Array.prototype.forEach.call(form.elements.type, function (r) { r.addEventListener('change', sync); });
    sync();
    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var type = form.elements.type.value;
      var f = {};
      var v = function (n) { return form.elements[n].value.trim(); };
      if (type === 'customers') {
        ['city', 'level', 'code_prefix'].forEach(function (n) { if (v(n)) f[n] = v(n); });
      } else {
        if (v('status')) f.status = [v('status')];
        if (v('task_type')) f.type = [v('task_type')];
        if (v('created_from')) f.created_from = new Date(v('created_from') + 'T00:00:00').toISOString().replace(/\.\d+Z$/, 'Z');
        if (v('created_to')) f.created_to = new Date(v('created_to') + 'T23:59:59').toISOString().replace(/\.\d+Z$/, 'Z');
      }
      $('#export-submit').disabled = true;
      var body = { type: type, filter: f, lang: zh ? 'zh' : 'en' }; // the file speaks the page's language
      api('POST', '/api/v1/exports', body, { 'Idempotency-Key': submitKey(nonce, body) }).then(function (r) {
        $('#export-submit').disabled = false;
        answer(box, r, function (task) { return t('export.accepted', { id: task.id }); });
      });
    });
  }

  var pages = { list: listPage, detail: detailPage, import: importPage, export: exportPage };
  if (pages[boot.page]) pages[boot.page]();
})();
