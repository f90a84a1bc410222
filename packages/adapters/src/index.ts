/**
 * @timer/adapters: implementations of the core's ports — the SQL stores
 * (SQLite and PostgreSQL), wake-ups over PostgreSQL and webhook delivery.
 */
export * from "./http/callbackResponse.js"
export * from "./http/WebhookDelivery.js"
export * from "./sql/SqlTimerStore.js"
export * from "./sql/timerRows.js"
export * from "./pg/PgMigrations.js"
export * from "./pg/PgStore.js"
export * from "./pg/PgWakeups.js"
export * from "./sqlite/SqliteMigrations.js"
export * from "./sqlite/SqliteStore.js"
