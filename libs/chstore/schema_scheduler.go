package chstore

// schedulerMigrations are the schema versions 300-399, owned by the scheduler (URL terminal states, revisits, change history). Append; never edit
// an applied version.
var schedulerMigrations = []Migration{}
