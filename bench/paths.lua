-- wrk script: GET a path drawn at random from the file $PATHS (one a line;
-- with $COLUMN=2 the second field of each line), with If-Modified-Since
-- set to now when $FRESH is set (every answer then a 304).
local paths = {}
local column = tonumber(os.getenv("COLUMN") or "1")
for line in io.lines(os.getenv("PATHS")) do
  local fields = {}
  for field in line:gmatch("%S+") do fields[#fields + 1] = field end
  paths[#paths + 1] = fields[column]
end
local headers = {}
if os.getenv("FRESH") then headers["If-Modified-Since"] = os.date("!%a, %d %b %Y %H:%M:%S GMT") end
math.randomseed(7)
request = function()
  return wrk.format("GET", paths[math.random(#paths)], headers)
end
