/**
 * @timer/server: the HTTP API and the settings of the runnable service.
 */
export * from "./http/Api.js"
export * from "./http/ApiErrors.js"
export * from "./http/decodeBody.js"
export * from "./http/Handlers.js"
export * from "./http/HttpServer.js"
export * from "./ServerConfig.js"
export * from "./ServerLayer.js"
