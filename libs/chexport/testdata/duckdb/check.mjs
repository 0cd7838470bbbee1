// Reads a Parquet file with DuckDB and prints, as one JSON object, its row
// count, its columns with the types DuckDB gives them, and its rows as
// text (at most the first 100): an independent read-back of what
// libs/chexport writes (TestParquetDuckDB).
//
//   node check.mjs FILE.parquet
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
if (!file) {
  console.error('usage: node check.mjs FILE.parquet');
  process.exit(2);
}
const quoted = "'" + file.replaceAll("'", "''") + "'";
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
// Timestamps as UTC text, whatever the machine's zone.
await conn.run("SET TimeZone = 'UTC'");
const count = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM read_parquet(${quoted})`);
const describe = await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${quoted})`);
const columns = describe.getRowObjectsJS().map((r) => ({ name: r.column_name, type: r.column_type }));
const casts = columns.map((c) => `CAST("${c.name}" AS VARCHAR) AS "${c.name}"`).join(', ');
const rows = await conn.runAndReadAll(`SELECT ${casts} FROM read_parquet(${quoted}) LIMIT 100`);
console.log(JSON.stringify({
  rows: Number(count.getRowObjectsJS()[0].n),
  columns,
  values: rows.getRowObjectsJS(),
}));
conn.closeSync();
instance.closeSync();
