// My bookings stays current: the server pokes /ws/bookings/ after a decision, a release or a
// booking of the person's, and the page re-reads its list (htmx, the same URL, only
// #mine-live), and again when its socket comes back (the server restarted: what changed
// meanwhile was poked to nobody). The database is the record: a lost poke costs freshness,
// never a decision.
// Also the calendar section's Copy button.
(() => {
  const region = () => document.getElementById("mine-live");
  if (region()) {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    let delay = 500;
    let opened = false;
    // One read at a time, and one more after it if a poke came meanwhile: htmx would queue
    // that one with the element it replaces as its target, and swap the news into nothing.
    let reading = false;
    let again = false;
    const reread = () => {
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      htmx
        .ajax("GET", location.pathname + location.search, {
          target: "#mine-live",
          select: "#mine-live",
          swap: "outerHTML",
        })
        .finally(() => {
          reading = false;
          if (again) {
            again = false;
            reread();
          }
        });
    };
    const connect = () => {
      const socket = new WebSocket(`${scheme}://${location.host}${region().dataset.liveSocket}`);
      socket.onopen = () => {
        delay = 500;
        if (opened) reread();
        opened = true;
        document.body.dataset.bookingsLive = "open";
      };
      socket.onmessage = reread;
      socket.onclose = (event) => {
        document.body.dataset.bookingsLive = "closed";
        if (event.code === 4401) return; // signed out: nothing to follow
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 10000);
      };
    };
    connect();
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-copy]");
    if (!button) return;
    const field = document.querySelector(button.dataset.copy);
    field.select();
    if (navigator.clipboard) navigator.clipboard.writeText(field.value);
    button.dataset.copied = "true";
  });
})();
