// memvault console: the CSRF header on htmx's requests, and the live activity feed.
// No inline script anywhere: the Content-Security-Policy is default-src 'self'.
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Every request htmx makes carries the session's CSRF token (the server checks it on changes).
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = csrfToken();
  });

  var FEED_KEPT = 50;

  function feedLine(item) {
    var line = document.createElement("li");
    line.dataset.id = String(item.id);
    line.dataset.type = item.type;
    line.className = "fresh";
    var when = document.createElement("time");
    when.textContent = item.when;
    var text = document.createElement("span");
    text.textContent = item.text;
    line.appendChild(when);
    line.appendChild(document.createTextNode(" "));
    line.appendChild(text);
    return line;
  }

  function follow(feed) {
    var state = document.getElementById("live-state");
    var say = function (words) {
      if (state) {
        state.textContent = words;
      }
    };
    var source = new EventSource(feed.dataset.feed);
    source.onopen = function () {
      say("live");
      feed.dataset.live = "true";
    };
    source.onerror = function () {
      say("reconnecting…");
      feed.dataset.live = "false";
    };
    source.onmessage = function (message) {
      var item;
      try {
        item = JSON.parse(message.data);
      } catch (ignored) {
        return;
      }
      if (feed.querySelector('li[data-id="' + String(item.id) + '"]')) {
        return;
      }
      var empty = feed.querySelector(".empty");
      if (empty) {
        empty.remove();
      }
      feed.insertBefore(feedLine(item), feed.firstChild);
      while (feed.children.length > FEED_KEPT) {
        feed.removeChild(feed.lastChild);
      }
    };
    window.addEventListener("pagehide", function () {
      source.close();
    });
  }

  function start() {
    var feed = document.getElementById("feed");
    if (feed && window.EventSource) {
      follow(feed);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
