// Stand-in for the npm package `linkifyjs` (not packaged by Debian),
// written for scripts/check-stream-js. Only `find(text, 'url')` is
// provided, as a small finder of http(s) and www. links; the client uses
// it only for link previews, which the check never enables.
const URL_PATTERN = /\b(?:https?:\/\/|www\.)[^\s<>"']+/gi;

export function find(text, type, options = {}) {
  if (type !== undefined && type !== 'url') return [];
  const protocol = options.defaultProtocol ?? 'http';
  const links = [];
  for (const match of String(text ?? '').matchAll(URL_PATTERN)) {
    const value = match[0].replace(/[.,;:!?)]+$/, '');
    const href = /^https?:\/\//i.test(value) ? value : `${protocol}://${value}`;
    links.push({ type: 'url', value, href, isLink: true, start: match.index, end: match.index + value.length });
  }
  return links;
}

export default { find };
