-- wrk script for bench/server-ceiling and bench/floors: every request marks one message read,
-- each channel's reader moving through its messages in order.
local channels = tonumber(os.getenv("CHANNELS"))
local prefix = os.getenv("PREFIX")
local key = os.getenv("API_KEY")
-- bench/floors: MESSAGE_SUFFIX "x" names no message (404); MESSAGE_INDEX names
-- one message in every channel, behind the cursors (nothing moves).
local suffix = os.getenv("MESSAGE_SUFFIX") or ""
local fixed = tonumber(os.getenv("MESSAGE_INDEX"))
-- bench/floors --postgres: the floor read the first MESSAGE_OFFSET messages of each channel already.
local offset = tonumber(os.getenv("MESSAGE_OFFSET")) or 0
local sent = 0

wrk.method = "POST"
wrk.headers["Authorization"] = os.getenv("TOKEN")
wrk.headers["stream-auth-type"] = "jwt"
wrk.headers["Content-Type"] = "application/json"

request = function()
  local channel = sent % channels
  local message = fixed or offset + math.floor(sent / channels)
  sent = sent + 1
  local path = "/channels/messaging/" .. prefix .. "c" .. channel .. "/read?api_key=" .. key
  local body = string.format('{"user_id": "%sr%d", "message_id": "%sc%dm%d%s"}', prefix, channel, prefix, channel, message, suffix)
  return wrk.format(nil, path, nil, body)
end

-- bench/floors paces each connection: one request every DELAY_MS ms.
local pace = tonumber(os.getenv("DELAY_MS"))
if pace then
  delay = function() return pace end
end
