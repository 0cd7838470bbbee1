-- Analyst queries for the crawler's ClickHouse tables.
-- Every query here is also in docs/analyst-queries.md and is run by
-- TestAnalystQueries against a migrated database (ClickHouse 18.16 and
-- current releases). Blocks start with "-- name:"; each query ends with ";".

-- name: pages_per_host_per_minute
-- Pages fetched per host per minute, last hour, exact (FINAL collapses redelivered rows).
SELECT
    crawl_id,
    host,
    toStartOfMinute(fetched_at) AS minute,
    count() AS pages,
    countIf(error_kind != '') AS errors,
    sum(bytes) AS bytes
FROM fetch_log FINAL
WHERE fetched_at >= now() - INTERVAL 1 HOUR
GROUP BY crawl_id, host, minute
ORDER BY minute, pages DESC
LIMIT 1000;

-- name: pages_per_host_per_minute_rollup
-- The same from the materialized rollup: cheap over long ranges, counts every insert (redelivered duplicates included).
SELECT
    crawl_id,
    host,
    minute,
    sum(pages) AS page_count,
    sum(errors) AS error_count,
    sum(bytes) AS byte_count,
    round(sum(duration_ms_sum) / page_count) AS avg_duration_ms
FROM fetch_per_host_minute
WHERE minute >= now() - INTERVAL 1 DAY
GROUP BY crawl_id, host, minute
ORDER BY minute, page_count DESC
LIMIT 1000;

-- name: status_codes_over_time
-- Responses per minute by status class (0 = no response: see error_kind), from the rollup.
SELECT
    crawl_id,
    minute,
    intDiv(status, 100) * 100 AS status_class,
    sum(n) AS responses
FROM fetch_status_minute
WHERE minute >= now() - INTERVAL 1 DAY
GROUP BY crawl_id, minute, status_class
ORDER BY minute, status_class;

-- name: status_codes_exact
-- Exact status code counts per crawl, last day.
SELECT
    crawl_id,
    status,
    count() AS responses
FROM fetch_log FINAL
WHERE fetched_at >= now() - INTERVAL 1 DAY
GROUP BY crawl_id, status
ORDER BY crawl_id, responses DESC;

-- name: failure_reasons
-- Why fetches fail: error kinds with how many hosts they hit and one example message (a redirect, a robots.txt denial, a cancelled crawl's or a spent budget's request is no failure).
SELECT
    crawl_id,
    error_kind,
    count() AS failures,
    uniqExact(host) AS hosts,
    any(error_message) AS example
FROM fetch_log FINAL
WHERE error_kind NOT IN ('', 'redirect', 'robots_denied', 'cancelled', 'budget_exhausted')
  AND fetched_at >= now() - INTERVAL 1 DAY
GROUP BY crawl_id, error_kind
ORDER BY failures DESC;

-- name: failing_hosts
-- Hosts with the most failures (as in failure_reasons), with their failure rate.
SELECT
    crawl_id,
    host,
    countIf(error_kind NOT IN ('', 'redirect', 'robots_denied', 'cancelled', 'budget_exhausted')) AS failures,
    count() AS attempts,
    round(failures / attempts, 3) AS failure_rate,
    topKIf(3)(error_kind, error_kind NOT IN ('', 'redirect', 'robots_denied', 'cancelled', 'budget_exhausted')) AS top_kinds
FROM fetch_log FINAL
WHERE fetched_at >= now() - INTERVAL 1 DAY
GROUP BY crawl_id, host
HAVING failures > 0
ORDER BY failures DESC
LIMIT 50;

-- name: bytes_per_host
-- Bytes downloaded per host (top 20 per crawl by volume).
SELECT
    crawl_id,
    host,
    sum(bytes) AS total_bytes,
    formatReadableSize(total_bytes) AS readable,
    round(avg(bytes)) AS avg_page_bytes
FROM fetch_log FINAL
GROUP BY crawl_id, host
ORDER BY crawl_id, total_bytes DESC
LIMIT 20 BY crawl_id;

-- name: latency_percentiles
-- Fetch latency percentiles per host for fetches that got a response.
SELECT
    crawl_id,
    host,
    count() AS fetches,
    quantiles(0.5, 0.9, 0.99)(duration_ms) AS p50_p90_p99_ms,
    max(duration_ms) AS max_ms
FROM fetch_log FINAL
WHERE status != 0
GROUP BY crawl_id, host
ORDER BY fetches DESC
LIMIT 100;

-- name: duplicates
-- Duplicates per crawl: fetch rows redelivered (raw minus FINAL), URLs fetched more than once, fingerprints persisted twice.
SELECT
    crawl_id,
    attempts,
    fetched_urls,
    attempts - fetched_urls AS repeat_attempts,
    raw_rows - attempts AS redelivered_fetch_rows,
    seen_rows - admitted_urls AS redelivered_seen_rows
FROM
(
    SELECT crawl_id, attempts, fetched_urls, raw_rows
    FROM
    (
        SELECT crawl_id, count() AS attempts, uniqExact(url_fp) AS fetched_urls
        FROM fetch_log FINAL
        GROUP BY crawl_id
    )
    ANY LEFT JOIN
    (
        SELECT crawl_id, count() AS raw_rows
        FROM fetch_log
        GROUP BY crawl_id
    ) USING crawl_id
)
ANY LEFT JOIN
(
    SELECT crawl_id, count() AS seen_rows, uniqExact(fp) AS admitted_urls
    FROM url_seen
    GROUP BY crawl_id
) USING crawl_id
ORDER BY crawl_id;

-- name: duplicate_content
-- Pages whose content is an exact duplicate of another page (same content fingerprint).
SELECT
    crawl_id,
    count() AS documents,
    uniqExact(content_fp) AS distinct_contents,
    documents - distinct_contents AS duplicate_documents
FROM documents FINAL
GROUP BY crawl_id
ORDER BY crawl_id;

-- name: text_sizes
-- The text stored per crawl: documents, their text in bytes (total, average, largest). Each page counts once, in its latest version (argMax by fetched_at), without FINAL: a FINAL read of the text holds a block of every unmerged part at once, and on a crawl of a million pages asks the server for gigabytes.
SELECT
    crawl_id,
    count() AS documents,
    sum(bytes) AS text_bytes,
    round(avg(bytes)) AS avg_text_bytes,
    max(bytes) AS max_text_bytes
FROM
(
    SELECT crawl_id, url_fp, argMax(length(text), fetched_at) AS bytes
    FROM documents
    GROUP BY crawl_id, url_fp
)
GROUP BY crawl_id
ORDER BY crawl_id;

-- name: products
-- Products a crawl found, from the JSON-LD its pages publish (documents.json_ld): name, price and currency of the first schema.org Product item of each page, with its og:image. ClickHouse 18.16 has no JSON functions but the visitParam* ones, which read the first field of a name anywhere in the text: each is read from where the Product item starts, so that a breadcrumb's names before it do not count; the price raw, quotes removed, as sites write it as a string or a number.
SELECT
    crawl_id,
    url,
    visitParamExtractString(product, 'name') AS name,
    replaceAll(visitParamExtractRaw(product, 'price'), '"', '') AS price,
    visitParamExtractString(product, 'priceCurrency') AS currency,
    visitParamExtractString(opengraph, 'og:image') AS image
FROM
(
    SELECT crawl_id, url, opengraph, substring(json_ld, position(json_ld, '"@type":"Product"')) AS product
    FROM documents FINAL
    WHERE position(json_ld, '"@type":"Product"') > 0
)
ORDER BY crawl_id, url
LIMIT 1000;

-- name: language_mismatch
-- Pages whose text is in another language than the one they declare (documents.language, <html lang> or Content-Language) by the parser's detection (documents.language_detected, ISO 639-1, '' when unknown): the declared tag's first subtag against the detected code.
SELECT crawl_id, url, language, language_detected
FROM documents FINAL
WHERE language != '' AND language_detected != ''
    AND splitByChar('-', replaceAll(language, '_', '-'))[1] != language_detected
ORDER BY crawl_id, url
LIMIT 1000;

-- name: field_values
-- Values of the fields a crawl's extraction rules took from its pages (documents.fields, one flat JSON object per page, '' when no rule matched): a string field, a number field as a Float64 and a date field (RFC 3339 text) of the pages that have a price.
SELECT
    crawl_id,
    url,
    visitParamExtractString(fields, 'name') AS name,
    visitParamExtractFloat(fields, 'price') AS price,
    visitParamExtractString(fields, 'released') AS released
FROM documents FINAL
WHERE visitParamHas(fields, 'price')
ORDER BY crawl_id, url
LIMIT 1000;

-- name: field_lists
-- The values of a list field (a JSON array of strings: here the image URLs of product pages), one row each.
SELECT
    crawl_id,
    url,
    arrayJoin(extractAll(visitParamExtractRaw(fields, 'images'), '"([^"]*)"')) AS image
FROM documents FINAL
WHERE visitParamHas(fields, 'images')
ORDER BY crawl_id, url, image
LIMIT 1000;

-- name: extract_rules
-- Pages per extraction rule (document_meta.extract_rule, the first rule whose pattern and hosts matched the page): how many got every field of the rule, how many missed one or more.
SELECT
    crawl_id,
    extract_rule,
    count() AS pages,
    countIf(empty(extract_missing)) AS complete,
    countIf(notEmpty(extract_missing)) AS incomplete
FROM document_meta FINAL
WHERE extract_rule != ''
GROUP BY crawl_id, extract_rule
ORDER BY crawl_id, extract_rule;

-- name: extract_missing
-- The fields of each rule that matched nothing (document_meta.extract_missing), on how many of the rule's pages, with an example: a share of 1 is a selector that matches no page (a site's redesign, a typo).
SELECT
    crawl_id,
    extract_rule,
    field,
    pages,
    pages - missing AS found,
    missing,
    round(missing / pages, 3) AS missing_share,
    example
FROM
(
    SELECT
        crawl_id,
        extract_rule,
        field,
        count() AS missing,
        min(url) AS example
    FROM document_meta FINAL
    ARRAY JOIN extract_missing AS field
    WHERE extract_rule != ''
    GROUP BY crawl_id, extract_rule, field
)
ANY LEFT JOIN
(
    SELECT crawl_id, extract_rule, count() AS pages
    FROM document_meta FINAL
    WHERE extract_rule != ''
    GROUP BY crawl_id, extract_rule
) USING (crawl_id, extract_rule)
ORDER BY crawl_id, extract_rule, missing_share DESC, field;

-- name: parse_errors
-- Documents whose reading stopped on an error (document_meta.parse_error: an encrypted or truncated PDF, a file too slow to read), by kind, with an example.
SELECT
    crawl_id,
    parse_error,
    count() AS documents,
    min(url) AS example
FROM document_meta FINAL
WHERE parse_error != ''
GROUP BY crawl_id, parse_error
ORDER BY crawl_id, documents DESC, parse_error;

-- name: pdf_documents
-- PDF documents with what they say of themselves (documents.properties: author, created, pages) and the error that stopped the reading of their text, if any.
SELECT crawl_id, url, title, author, created, pages, parse_error
FROM
(
    SELECT
        crawl_id,
        url_fp,
        url,
        title,
        visitParamExtractString(properties, 'author') AS author,
        visitParamExtractString(properties, 'created') AS created,
        visitParamExtractUInt(properties, 'pages') AS pages
    FROM documents FINAL
    WHERE content_type = 'application/pdf'
)
ANY LEFT JOIN
(
    SELECT crawl_id, url_fp, parse_error
    FROM document_meta FINAL
    WHERE parse_error != ''
) USING (crawl_id, url_fp)
ORDER BY crawl_id, url
LIMIT 1000;

-- name: near_duplicates
-- Documents that nearly duplicate an earlier one (mirrors, reprints, pages that differ by a date or a word), with the original and the distance between their simhashes.
SELECT
    n.crawl_id,
    n.near_duplicate_of AS original,
    count() AS copies,
    groupArray(5)(n.url) AS some_copies,
    min(n.distance) AS closest_bits,
    any(d.title) AS a_copy_title
FROM near_duplicates AS n FINAL
ANY LEFT JOIN (SELECT crawl_id, url_fp, title FROM documents FINAL) AS d USING (crawl_id, url_fp)
GROUP BY n.crawl_id, n.near_duplicate_of
ORDER BY copies DESC, original
LIMIT 100;

-- name: suspected_traps
-- The URL families of each host whose new URLs the crawl ended as trap_suspected, the largest first.
SELECT
    host,
    replaceRegexpAll(pathFull(url), '[0-9]+', '#') AS family,
    uniqExact(url_fp) AS urls_not_fetched,
    min(depth) AS shallowest,
    argMax(url, url_fp) AS example
FROM url_events
WHERE crawl_id = 'crawl-1' AND state = 'trap_suspected'
GROUP BY host, family
ORDER BY urls_not_fetched DESC, host, family
LIMIT 100;

-- name: crawl_order
-- What ordered the crawl: its fetches (last attempts) by the signals that made their priority and by priority band.
SELECT
    crawl_id,
    if(priority_reason = '', '(none)', priority_reason) AS signals,
    multiIf(priority >= 10, '10 and up', priority >= 1, '1 to 9', priority = 0, '0', 'below 0') AS band,
    max(priority) AS top_priority,
    count() AS fetches,
    countIf(status >= 200 AND status < 300) AS fetched_ok,
    min(depth) AS shallowest,
    max(depth) AS deepest
FROM fetch_log FINAL
WHERE final = 1
GROUP BY crawl_id, signals, band
ORDER BY crawl_id, top_priority DESC, signals;

-- name: in_links
-- Who links to a page, with which words (the table is keyed by target host, so name the host too).
SELECT
    source_url,
    anchor_text,
    rel,
    position
FROM links FINAL
WHERE crawl_id = 'crawl-1' AND target_host = 'h1.test' AND target_url = 'http://h1.test/p/1'
ORDER BY source_url, position
LIMIT 100;

-- name: host_anchor_texts
-- The words other pages use for a host's pages, and from how many hosts.
SELECT
    anchor_text,
    count() AS links,
    uniqExact(source_host) AS from_hosts,
    uniqExact(target_url) AS pages
FROM links FINAL
WHERE crawl_id = 'crawl-1' AND target_host = 'h1.test' AND anchor_text != ''
GROUP BY anchor_text
ORDER BY links DESC, anchor_text
LIMIT 20;

-- name: documents_found
-- Documents extracted per crawl and host, with language mix and link counts.
SELECT
    crawl_id,
    host,
    count() AS documents,
    sum(outlinks) AS outlinks,
    topK(3)(language) AS top_languages,
    max(fetched_at) AS last_fetched
FROM documents FINAL
GROUP BY crawl_id, host
ORDER BY documents DESC
LIMIT 100;

-- name: crawl_progress
-- Crawl progress: URLs admitted vs fetched, success rate, depth reached, pages in the last 10 minutes.
SELECT
    crawl_id,
    admitted_urls,
    fetched_urls,
    toInt64(admitted_urls) - toInt64(fetched_urls) AS frontier_estimate,
    ok_urls,
    max_depth,
    pages_last_10m,
    first_fetch,
    last_fetch
FROM
(
    SELECT
        crawl_id,
        uniqExact(fp) AS admitted_urls,
        max(depth) AS max_depth
    FROM url_seen
    GROUP BY crawl_id
)
ANY LEFT JOIN
(
    SELECT
        crawl_id,
        uniqExact(url_fp) AS fetched_urls,
        uniqExactIf(url_fp, status >= 200 AND status < 300) AS ok_urls,
        countIf(fetched_at >= now() - INTERVAL 10 MINUTE) AS pages_last_10m,
        min(fetched_at) AS first_fetch,
        max(fetched_at) AS last_fetch
    FROM fetch_log FINAL
    GROUP BY crawl_id
) USING crawl_id
ORDER BY crawl_id;

-- name: crawl_status
SELECT
    crawl_id,
    admitted,
    terminal,
    toInt64(admitted) - toInt64(terminal) AS pending,
    retrying,
    fetched,
    redirected,
    robots_denied,
    failed,
    cancelled,
    budget_exhausted,
    dropped,
    if(pending = 0, 'finished', 'running') AS status
FROM
(
    SELECT crawl_id, admitted, terminal, retrying, fetched, redirected, robots_denied, failed, cancelled, budget_exhausted
    FROM
    (
        SELECT crawl_id, uniqExact(fp) AS admitted
        FROM url_seen
        GROUP BY crawl_id
    )
    ANY LEFT JOIN
    (
        SELECT
            crawl_id,
            countIf(done) AS terminal,
            countIf(NOT done) AS retrying,
            countIf(done AND outcome = 'fetched') AS fetched,
            countIf(done AND outcome = 'redirected') AS redirected,
            countIf(done AND outcome = 'robots_denied') AS robots_denied,
            countIf(done AND outcome = 'failed') AS failed,
            countIf(done AND outcome = 'cancelled') AS cancelled,
            countIf(done AND outcome = 'budget_exhausted') AS budget_exhausted
        FROM
        (
            SELECT
                crawl_id,
                url_fp,
                max(final) AS done,
                argMaxIf(
                    multiIf(error_kind = '', 'fetched', error_kind = 'redirect', 'redirected', error_kind = 'robots_denied', 'robots_denied', error_kind = 'cancelled', 'cancelled', error_kind = 'budget_exhausted', 'budget_exhausted', 'failed'),
                    (fetched_at, fetched_at_ms, attempt),
                    final = 1) AS outcome
            FROM
            (
                SELECT crawl_id, url_fp, final, fetched_at, fetched_at_ms, attempt, error_kind
                FROM fetch_log
                WHERE (crawl_id, url_fp) IN (SELECT crawl_id, fp FROM url_seen)
                UNION ALL
                SELECT crawl_id, fp AS url_fp, toUInt8(1) AS final, updated_at AS fetched_at, toUInt16(0) AS fetched_at_ms, toUInt16(0) AS attempt, 'cancelled' AS error_kind
                FROM frontier_v2
                WHERE state = 2 AND (crawl_id, fp) IN (SELECT crawl_id, fp FROM url_seen)
            )
            GROUP BY crawl_id, url_fp
        )
        GROUP BY crawl_id
    ) USING crawl_id
)
ANY LEFT JOIN
(
    SELECT crawl_id, uniqExact(url_fp, state) AS dropped
    FROM url_events
    GROUP BY crawl_id
) USING crawl_id
ORDER BY crawl_id;

-- name: url_journey
SELECT *
FROM
(
    SELECT 'admitted' AS state, toString(depth) AS detail, first_seen AS time
    FROM url_seen
    WHERE crawl_id = 'crawl-1' AND url = 'http://h0.test/p/0'
    UNION ALL
    SELECT state, reason AS detail, event_time AS time
    FROM url_events
    WHERE crawl_id = 'crawl-1' AND url = 'http://h0.test/p/0'
    UNION ALL
    SELECT
        multiIf(final = 0, 'retry_scheduled', error_kind = '', 'fetched', error_kind = 'redirect', 'redirected', error_kind = 'robots_denied', 'robots_denied', 'failed') AS state,
        if(error_kind = '', toString(status), concat(error_kind, ': ', error_message)) AS detail,
        fetched_at AS time
    FROM fetch_log
    WHERE crawl_id = 'crawl-1' AND url = 'http://h0.test/p/0'
)
ORDER BY time, state;

-- name: url_change_history
-- Per-URL change history of a re-crawled page: every fetch with the revisit verdict (changed, 304) and the interval chosen after it.
SELECT fetched_at, status, error_kind, changed, not_modified, content_fp, interval_s
FROM
(
    SELECT crawl_id, url_fp, fetched_at, status, error_kind
    FROM fetch_log FINAL
    WHERE crawl_id = 'crawl-1' AND url = 'http://h0.test/p/0'
)
ANY LEFT JOIN
(
    SELECT crawl_id, url_fp, visited_at AS fetched_at, changed, not_modified, content_fp, interval_s
    FROM change_history FINAL
    WHERE crawl_id = 'crawl-1'
) USING (crawl_id, url_fp, fetched_at)
ORDER BY fetched_at;

-- name: host_change_rate
-- Per-host change history, last day: fetches, revisit visits, changed and not-modified visits, share of re-visits that found a change.
SELECT
    crawl_id,
    host,
    fetches,
    visits,
    changed,
    not_modified,
    round(changed / greatest(toInt64(visits) - toInt64(urls), 1), 3) AS change_rate
FROM
(
    SELECT crawl_id, host, count() AS fetches
    FROM fetch_log FINAL
    WHERE fetched_at >= now() - INTERVAL 1 DAY
    GROUP BY crawl_id, host
)
ANY LEFT JOIN
(
    SELECT crawl_id, host, count() AS visits, uniqExact(url_fp) AS urls, sum(changed) AS changed, sum(not_modified) AS not_modified
    FROM change_history FINAL
    WHERE visited_at >= now() - INTERVAL 1 DAY
    GROUP BY crawl_id, host
) USING (crawl_id, host)
ORDER BY changed DESC, fetches DESC
LIMIT 100;

-- name: revisit_schedule
-- The revisit schedule of a crawl's admitted URLs, next due first (visits 0: not under a revisit policy or not fetched yet).
SELECT url, visits, changes, interval_s, next_visit, etag, last_modified
FROM
(
    SELECT crawl_id, fp AS url_fp, url
    FROM url_seen FINAL
    WHERE crawl_id = 'crawl-1'
)
ANY LEFT JOIN
(
    SELECT crawl_id, url_fp, visits, changes, interval_s, next_visit, etag, last_modified
    FROM revisits FINAL
    WHERE crawl_id = 'crawl-1'
) USING (crawl_id, url_fp)
ORDER BY visits = 0, next_visit, url
LIMIT 1000;

-- name: archived_responses
-- Where a crawl's answers are archived (fetcher --warc-dir): the WARC file, its directory and the offset of the gzip member holding the response (revisit, resource) record.
SELECT url, status, fetched_at, warc_file, dir, warc_offset, closed_at
FROM
(
    SELECT url, status, fetched_at, warc_file, warc_offset
    FROM fetch_log FINAL
    WHERE crawl_id = 'crawl-1' AND warc_file != ''
)
ANY INNER JOIN
(
    SELECT file AS warc_file, dir, closed_at
    FROM warc_files FINAL
) USING warc_file
ORDER BY fetched_at DESC
LIMIT 100;
