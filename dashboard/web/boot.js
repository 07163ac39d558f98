// Classic script, loaded before the modules: if app.js never starts (a module failed to load
// or parse, or the browser lacks ES modules), say so instead of leaving a page that loads
// forever. app.js sets window.netdoctorStarted first thing.
(function () {
  'use strict';
  const failed = [];
  window.addEventListener('error', function (e) {
    const t = e && e.target;
    if (t && t !== window && (t.src || t.href)) failed.push(t.src || t.href);
  }, true);
  window.addEventListener('load', function () {
    setTimeout(function () {
      if (window.netdoctorStarted) return;
      const box = document.getElementById('global-status');
      if (!box) return;
      const p = document.createElement('p');
      p.className = 'error';
      p.setAttribute('role', 'alert');
      p.setAttribute('data-testid', 'fatal-error');
      p.textContent = 'The dashboard could not start' +
        (failed.length ? ' (failed to load: ' + failed.join(', ') + ')' : '') +
        '. It needs a browser with JavaScript modules. The API stays available at api/v1/interfaces.';
      box.appendChild(p);
    }, 1500);
  });
})();
