package chstore

// jobsMigrations are the schema versions 400-499, owned by crawl jobs and the proxy pool. Append; never edit
// an applied version.
var jobsMigrations = []Migration{}
