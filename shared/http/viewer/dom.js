// Small DOM helpers shared by the viewer's modules.

/** `<tag attributes…>children…</tag>`; null and undefined are left out. */
export function make(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

/** A value as indented JSON. */
export const pretty = (value) => make("pre", {}, JSON.stringify(value, null, 2));

export const millis = (ms) => (ms == null ? "—" : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms} ms`);
