// Focus is never lost to <body> by an htmx swap: a live refresh of one region (the day view's
// grid after a booking elsewhere, a run card's event, the navigation's counts) must not take
// the keyboard user's place away. The last focused element with an id is remembered; after a
// swap settles with nothing focused, focus goes back to it, or to the element with that id in
// the new content.
(() => {
  let lastId = null;
  document.addEventListener("focusin", (event) => {
    if (event.target && event.target.id) lastId = event.target.id;
  });
  document.addEventListener("htmx:afterSettle", () => {
    const active = document.activeElement;
    if (active && active !== document.body) return;
    const again = lastId && document.getElementById(lastId);
    if (again) again.focus({ preventScroll: true });
  });
})();
