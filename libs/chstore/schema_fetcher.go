package chstore

// fetcherMigrations are the schema versions 100-199, owned by the fetcher (per-host state, retries, robots). Append; never edit
// an applied version.
var fetcherMigrations = []Migration{}
