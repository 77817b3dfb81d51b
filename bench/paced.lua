-- wrk script for bench/floors: each connection sends its request every DELAY_MS ms.
local pace = tonumber(os.getenv("DELAY_MS"))
delay = function() return pace end
