// memvault console: the CSRF header on htmx's requests, the live activity feed, and Today's
// cards and the Approvals page kept current from the same event stream.
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

  // Follow the event stream at `url`: `onItem` gets each event, the "live" label its state.
  function listen(element, url, onItem) {
    var state = document.getElementById("live-state");
    var say = function (words) {
      if (state) {
        state.textContent = words;
      }
    };
    var source = new EventSource(url);
    source.onopen = function () {
      say("live");
      element.dataset.live = "true";
    };
    source.onerror = function () {
      say("reconnecting…");
      element.dataset.live = "false";
    };
    source.onmessage = function (message) {
      var item;
      try {
        item = JSON.parse(message.data);
      } catch (ignored) {
        return;
      }
      onItem(item);
    };
    window.addEventListener("pagehide", function () {
      source.close();
    });
  }

  // Today's activity feed: each new event is a line at the top, and has htmx fetch the
  // cards again (the summary's hx-get, on "today-changed", once the events pause).
  function follow(feed) {
    var summary = document.getElementById("summary");
    listen(feed, feed.dataset.feed, function (item) {
      if (summary && window.htmx) {
        window.htmx.trigger(summary, "today-changed");
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
    });
  }

  // The Approvals page: a call asked or decided anywhere (the phone, this console, the
  // timeout) has htmx fetch the lists again (the element's hx-get, on "approvals-changed").
  function refreshOnApprovals(lists) {
    listen(lists, lists.dataset.feed, function (item) {
      if (String(item.type).indexOf("approval_") === 0 && window.htmx) {
        window.htmx.trigger(lists, "approvals-changed");
      }
    });
  }

  function start() {
    if (!window.EventSource) {
      return;
    }
    var feed = document.getElementById("feed");
    if (feed) {
      follow(feed);
    }
    var approvals = document.getElementById("approvals");
    if (approvals && approvals.dataset.feed) {
      refreshOnApprovals(approvals);
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
