-- wrk script: GET /api/v1/search over a mix of queries (free text, filters,
-- sorts, pages, aggregations), cycled in order by each connection's thread.
local queries = {
  "/api/v1/search",
  "/api/v1/search?q=code",
  "/api/v1/search?q=market+intelligence&limit=20",
  "/api/v1/search?registries=erc-8004&sortBy=trust-score",
  "/api/v1/search?capabilities=text-generation&online=true",
  "/api/v1/search?q=swift+writer&includeAggregations=false",
  "/api/v1/search?metadata.isFree=true&sortBy=name",
  "/api/v1/search?q=fraud&minTrust=60",
  "/api/v1/search?type=mcp-servers&protocols=mcp&page=3",
  "/api/v1/search?q=audit+compliance&registries=hashgraph-online,erc-8004",
  "/api/v1/search?verificationStatus=registered&metadata.deployment.region=eu-*",
  "/api/v1/search?q=translation&sortBy=most-recent",
}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", queries[(i % #queries) + 1])
end
