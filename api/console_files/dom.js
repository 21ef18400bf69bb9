// Building the page from data: every value becomes a text node, never markup, so a memory whose text is
// HTML or script shows its characters and runs nothing.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

// The words of `query` marked in `text` (case-insensitive, each word's start): text nodes and <mark>s only.
export function highlighted(text, query) {
  const words = (query || "").toLowerCase().match(/[\p{L}\p{N}_]+/gu) || [];
  if (!words.length) return [text];
  const escaped = words.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}_])(?:${escaped.join("|")})[\\p{L}\\p{N}_]*`, "giu");
  const parts = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    parts.push(text.slice(last, match.index), el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return parts;
}

export function field(label, control) {
  const id = control.id || `f-${Math.random().toString(36).slice(2)}`;
  control.id = id;
  return el("div", { class: "field" }, el("label", { for: id }, label), control);
}

export function table(caption, headings, rows) {
  return el("table", {},
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, headings.map((heading) => el("th", { scope: "col" }, heading)))),
    el("tbody", {}, rows));
}

export function definitions(pairs) {
  return el("dl", {}, pairs.map(([term, value]) => [el("dt", {}, term), el("dd", {}, value ?? "")]));
}

export function errorBox(error) {
  return el("p", { class: "error", role: "alert" }, error.message || String(error));
}

export function download(name, value) {
  const url = URL.createObjectURL(new Blob([JSON.stringify(value, null, 2)], { type: "application/json" }));
  const link = el("a", { href: url, download: name }, `Download ${name}`);
  return link;
}

export function counted(count, one, many) {
  return `${count} ${count === 1 ? one : many}`;
}
