// Login behind authentication (issue 16). Every API call of the UI goes
// through authFetch (it replaces window.fetch for this page, so the views'
// fetch(...) calls use it): it adds the user's credential (Authorization:
// Bearer <token> or Basic <user:password>) and an optional tenant
// (X-Scope-OrgID), kept in sessionStorage only (never in the URL or
// localStorage). A 401 shows the login form with the schemes the server's
// WWW-Authenticate lists and retries the call after login; a 403 shows the
// server's message (role or tenant). The static files of the UI are served
// without credentials, so the form can always load.
'use strict';
(function () {
  const KEY = 'flamecol.auth';
  const nativeFetch = window.fetch.bind(window);
  let pending = null; // the login in progress: every 401 waits for the same one

  const saved = () => {
    try {
      return JSON.parse(sessionStorage.getItem(KEY)) || {};
    } catch (e) {
      return {};
    }
  };
  const save = (a) => sessionStorage.setItem(KEY, JSON.stringify(a));

  function authorization(a) {
    if (a.token) return 'Bearer ' + a.token;
    if (a.user) {
      // btoa takes Latin-1: encode the UTF-8 bytes of "user:password"
      const bytes = new TextEncoder().encode(a.user + ':' + (a.password || ''));
      return 'Basic ' + btoa(String.fromCharCode(...bytes));
    }
    return null;
  }

  function withAuth(init) {
    const a = saved();
    const headers = new Headers((init && init.headers) || {});
    const h = authorization(a);
    if (h) headers.set('Authorization', h);
    if (a.tenant) headers.set('X-Scope-OrgID', a.tenant);
    // credentials 'omit': a 401 never brings up the browser's own basic prompt
    return Object.assign({}, init, { headers, credentials: 'omit' });
  }

  const el = (tag, props, kids) => {
    const e = Object.assign(document.createElement(tag), props || {});
    for (const k of kids || []) e.append(k);
    return e;
  };

  // The form: a token (Bearer), user and password (Basic), or both, as the
  // server's WWW-Authenticate offers; an optional tenant. Resolves on submit.
  function showForm(challenge, message) {
    const bearer = /\bbearer\b/i.test(challenge || '');
    const basic = /\bbasic\b/i.test(challenge || '') || !bearer;
    document.getElementById('login')?.remove();
    return new Promise((resolve) => {
      const a = saved();
      const token = el('input', { id: 'login-token', type: 'password', autocomplete: 'off', size: 30 });
      const user = el('input', { id: 'login-user', autocomplete: 'username', size: 16, value: a.user || '' });
      const password = el('input', { id: 'login-password', type: 'password', autocomplete: 'current-password', size: 16 });
      const tenant = el('input', { id: 'login-tenant', size: 16, value: a.tenant || '', placeholder: '(the credential\'s)' });
      const rows = [el('h2', { textContent: 'Log in to flamecol' })];
      if (message) rows.push(el('div', { id: 'login-error', textContent: message }));
      if (bearer) rows.push(el('label', {}, ['Token ', token]));
      if (bearer && basic) rows.push(el('div', { className: 'or', textContent: 'or' }));
      if (basic) rows.push(el('label', {}, ['User ', user]), el('label', {}, ['Password ', password]));
      rows.push(el('label', { title: 'X-Scope-OrgID, for a credential bound to no tenant' }, ['Tenant ', tenant]));
      rows.push(el('button', { id: 'login-submit', type: 'submit', textContent: 'Log in' }));
      const form = el('form', { id: 'login' }, [el('div', { className: 'box' }, rows)]);
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        const next = { tenant: tenant.value.trim() || undefined };
        if (bearer && token.value) next.token = token.value;
        else if (basic && user.value) Object.assign(next, { user: user.value, password: password.value });
        save(next);
        form.remove();
        showLogout();
        resolve();
      });
      document.body.append(form);
      (bearer ? token : user).focus();
    });
  }

  function login(challenge, message) {
    if (!pending) pending = showForm(challenge, message).finally(() => { pending = null; });
    return pending;
  }

  function showForbidden(message) {
    let b = document.getElementById('forbidden');
    if (!b) {
      b = el('div', { id: 'forbidden' });
      document.body.prepend(b);
    }
    b.textContent = 'Refused: ' + message;
  }

  async function authFetch(input, init) {
    for (;;) {
      const used = sessionStorage.getItem(KEY);
      const had = !!authorization(saved());
      const r = await nativeFetch(input, withAuth(init));
      if (r.status === 401 && sessionStorage.getItem(KEY) !== used) continue; // logged in meanwhile
      if (r.status === 401) {
        let msg = had ? 'Wrong credentials' : '';
        try {
          const j = await r.clone().json();
          if (had && j.message) msg += ': ' + j.message;
        } catch (e) { /* not JSON */ }
        await login(r.headers.get('WWW-Authenticate'), msg);
        continue; // again, with what was entered
      }
      if (r.status === 403) {
        let msg = 'permission denied';
        try {
          msg = (await r.clone().json()).message || msg;
        } catch (e) { /* not JSON */ }
        showForbidden(msg);
      }
      return r;
    }
  }

  function showLogout() {
    const a = saved();
    let b = document.getElementById('logout');
    if (!authorization(a) && !a.tenant) {
      b?.remove();
      return;
    }
    if (!b) {
      b = el('button', { id: 'logout', title: 'forget the credential of this tab' });
      b.addEventListener('click', () => {
        sessionStorage.removeItem(KEY);
        location.reload(); // the first call answers 401 again: the form
      });
      (document.querySelector('header') || document.body).append(b);
    }
    b.textContent = 'Log out' + (a.user ? ' ' + a.user : '');
  }

  window.fetch = authFetch;
  window.flamecolAuth = { fetch: authFetch, login, logout: () => document.getElementById('logout')?.click() };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', showLogout);
  else showLogout();
})();
