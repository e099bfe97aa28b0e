// The run card's socket (htmx ws extension): a reconnect resumes after the last event the
// card shows. The extension reconnects to the URL it first read, whose `after` is stale by then.
htmx.createWebSocket = function (url) {
  const target = new URL(url);
  const seq = document.getElementById("run-seq");
  if (seq) target.searchParams.set("after", seq.dataset.lastSeq);
  const socket = new WebSocket(target.toString(), []);
  socket.binaryType = htmx.config.wsBinaryType;
  return socket;
};
