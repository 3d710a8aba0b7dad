// The login link is /login#<ticket>: the fragment never leaves the browser. Take it out of the
// address bar and history at once, post it (once), then go to the status page.
// @ts-check
"use strict";
(async () => {
  const ticket = decodeURIComponent(location.hash.slice(1));
  history.replaceState(null, "", "/login");
  const message = /** @type {HTMLElement} */ (document.getElementById("message"));
  if (!ticket) {
    message.textContent = "This page needs the link printed by `toolbridge open --print`.";
    return;
  }
  const response = await fetch("/login", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Toolbridge-CSRF": "1" },
    body: JSON.stringify({ ticket }),
  });
  if (response.ok) {
    location.replace("/");
  } else {
    const body = await response.json().catch(() => ({}));
    message.textContent = body.error || `Login failed (HTTP ${response.status}).`;
  }
})();
