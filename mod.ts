/**
 * politely: throttle crawlers, scrapers and streaming ETL jobs as fast as a
 * site or API allows and no faster. Scrapy's throttling, backoff, rampup and
 * request scheduler, as RxJS operators and observable stores.
 *
 * The operators are in `operators/`, what they stand on in `lib/`
 * (`lib/README.md` maps it by subsystem).
 *
 * @module
 */
export * from "./lib/request.ts";
export * from "./lib/outcome.ts";
export * from "./lib/events.ts";
export * from "./lib/managers/scope_manager_protocol.ts";
export * from "./lib/settings/settings.ts";
export * from "./lib/scopes/scopes.ts";
export * from "./lib/managers/scope_manager.ts";
export * from "./lib/throttler/throttler.ts";
export * from "./operators/throttle_by_scope.ts";
export * from "./lib/scopes/domain_scopes.ts";
export * from "./lib/http/download_errors.ts";
export * from "./lib/http/rate_limit_headers.ts";
export * from "./lib/http/response_backoff.ts";
export * from "./lib/settings/scrapy_settings.ts";
export * from "./lib/sim/simulated_site.ts";
export * from "./operators/backoff_on.ts";
export * from "./lib/http/fetch_download.ts";
export * from "./lib/http/html_links.ts";
export * from "./operators/rampup.ts";
export * from "./lib/managers/autothrottle_manager.ts";
export * from "./lib/managers/fixed_window_manager.ts";
export * from "./lib/queue/request_queue.ts";
export * from "./lib/queue/request_fingerprint.ts";
export * from "./lib/queue/job_dir.ts";
export * from "./lib/queue/job_dir_lock.ts";
export * from "./lib/crawl.ts";
export * from "./lib/queue/crawl_queue.ts";
export * from "./lib/scopes/dns_cache.ts";
export * from "./lib/robots/robots_txt.ts";
export * from "./lib/robots/robots_download.ts";
export * from "./lib/util/precise_scheduler.ts";
export * from "./lib/redis/redis_scopes.ts";
export * from "./lib/redis/shared_download.ts";
export * from "./lib/redis/shared_backoff.ts";
export * from "./lib/redis/redis_request_queue.ts";
export * from "./lib/redis/redis_queue_status.ts";
export * from "./lib/redis/redis_cluster.ts";
export * from "./lib/sim/simulate.ts";
export * from "./lib/sim/site_spec.ts";
export * from "./lib/dashboard/dashboard_aggregator.ts";
export * from "./lib/dashboard/serve_dashboard.ts";
