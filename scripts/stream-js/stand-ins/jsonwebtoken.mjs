// Stand-in for the npm package `jsonwebtoken` (not packaged by Debian),
// written for scripts/check-stream-js. Only `sign` with HS256 is provided:
// the client signs a user or server token from an API secret with it and
// nothing else. Options honoured: algorithm (HS256 only), noTimestamp,
// expiresIn (seconds), header.
import { createHmac } from 'node:crypto';

const b64url = (data) => Buffer.from(data).toString('base64url');

export function sign(payload, secret, options = {}) {
  const algorithm = options.algorithm ?? 'HS256';
  if (algorithm !== 'HS256') {
    throw new Error(`jsonwebtoken stand-in: only HS256 is supported, not ${algorithm}`);
  }
  const body = { ...payload };
  const now = Math.floor(Date.now() / 1000);
  if (!options.noTimestamp && body.iat === undefined) body.iat = now;
  if (options.expiresIn !== undefined) {
    if (typeof options.expiresIn !== 'number') {
      throw new Error('jsonwebtoken stand-in: expiresIn must be a number of seconds');
    }
    body.exp = (body.iat ?? now) + options.expiresIn;
  }
  const header = { alg: 'HS256', typ: 'JWT', ...(options.header ?? {}) };
  const unsigned = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(body))}`;
  const signature = createHmac('sha256', secret).update(unsigned).digest('base64url');
  return `${unsigned}.${signature}`;
}

export default { sign };
