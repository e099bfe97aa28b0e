// Every page's navigation counts, live: the server pokes /ws/nav/ after a commit that changes
// the approvals inbox or the reconciliation queue; the page re-reads the counts (htmx, out of
// band). A new item in the queue also shows the operators' notice. A socket that comes back
// (the server restarted) re-reads them too: what changed meanwhile was poked to nobody.
(() => {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  let delay = 500;
  let opened = false;
  const open = () => {
    const socket = new WebSocket(`${scheme}://${location.host}/ws/nav/`);
    socket.onopen = () => {
      delay = 500;
      if (opened) htmx.trigger(document.body, "nav-counts");
      opened = true;
    };
    socket.onmessage = (event) => {
      const before = Number(document.getElementById("operators-count")?.textContent || 0);
      htmx.trigger(document.body, "nav-counts");
      const data = JSON.parse(event.data);
      if (data.changed === "queue") {
        document.body.addEventListener("htmx:afterSettle", () => {
          const after = Number(document.getElementById("operators-count")?.textContent || 0);
          const notice = document.getElementById("queue-notice");
          if (notice && after > before) notice.hidden = false;
        }, { once: true });
      }
    };
    socket.onclose = (event) => {
      if (event.code < 4000) setTimeout(open, (delay = Math.min(delay * 2, 10000)));
    };
  };
  open();
})();
