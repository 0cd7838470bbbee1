package chstore

// parserMigrations are the schema versions 200-299, owned by the parser (dropped links, duplicates, sitemaps). Append; never edit
// an applied version.
var parserMigrations = []Migration{}
