// Stand-in for the npm package `isomorphic-ws` (not packaged by Debian),
// written for scripts/check-stream-js: under Node it is just the `ws`
// package, here Debian's node-ws.
import WebSocket from 'ws';

export default WebSocket;
export { WebSocket };
