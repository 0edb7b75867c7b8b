-- wrk's script for `make bench` (benchmarks/run.py): what to send comes from the environment, what was measured
-- goes to stdout as one JSON line that starts with "BENCH ".
--   BENCH_METHOD  GET (default), PATCH, POST, ...
--   BENCH_PATHS   comma-separated paths, sent in turn (default: the URL's own path)
--   BENCH_BODY    request body; each "{n}" in it becomes a number unique to the request
local method = os.getenv("BENCH_METHOD") or "GET"
local body = os.getenv("BENCH_BODY")
local paths = {}
for path in string.gmatch(os.getenv("BENCH_PATHS") or "", "[^,]+") do
  table.insert(paths, path)
end
local threads = 0
local counter = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

function init(args)
  if body then
    wrk.headers["Content-Type"] = "application/json"
  end
end

function request()
  counter = counter + 1
  local path = nil
  if #paths > 0 then
    path = paths[(counter % #paths) + 1]
  end
  local payload = nil
  if body then
    payload = (string.gsub(body, "{n}", tostring(thread_id) .. "0" .. tostring(counter)))
  end
  return wrk.format(method, path, nil, payload)
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "socket_errors": %d, "status_errors": %d, ' ..
    '"p50_us": %d, "p95_us": %d, "p99_us": %d}\n',
    summary.requests, summary.duration, errors.connect + errors.read + errors.write + errors.timeout, errors.status,
    latency:percentile(50), latency:percentile(95), latency:percentile(99)))
end
