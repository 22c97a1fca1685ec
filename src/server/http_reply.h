// What a handler answers: an HTTP status and a JSON body, and OpenAI's error object, shared by the
// OpenAI routes (server.cc) and fak's own (conversations.cc, rollouts.cc, gate_claim.cc).
#ifndef FAK_SRC_SERVER_HTTP_REPLY_H_
#define FAK_SRC_SERVER_HTTP_REPLY_H_

#include <string>
#include <utility>

#include "fak/core/status.h"
#include "src/core/json.h"

namespace fak::internal {

struct HttpError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // "" → null
  std::string code;   // "" → null
};

// {"error": {"message", "type", "param", "code"}}, OpenAI's shape.
inline Json ErrorJson(const HttpError& e) {
  return Json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
                {"code", e.code.empty() ? Json(nullptr) : Json(e.code)}}}};
}

struct HttpReply {
  int status = 200;
  Json body;
  static HttpReply Ok(Json body) { return {200, std::move(body)}; }
  static HttpReply Error(const HttpError& e) { return {e.status, ErrorJson(e)}; }
  static HttpReply BadRequest(std::string message, std::string param = "", std::string code = "invalid_value") {
    return Error({400, "invalid_request_error", std::move(message), std::move(param), std::move(code)});
  }
};

// The reply for a library Status that is not OK: the client's fault (400 / 404 / 409) or not
// (503 retry later, 500).
inline HttpReply StatusReply(const Status& s, std::string param = "") {
  std::string message(s.message());
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return HttpReply::BadRequest(std::move(message), std::move(param));
    case StatusCode::kResourceExhausted:
      return HttpReply::BadRequest(std::move(message), std::move(param), "context_length_exceeded");
    case StatusCode::kNotFound:
      return HttpReply::Error({404, "invalid_request_error", std::move(message), std::move(param), "not_found"});
    case StatusCode::kFailedPrecondition:
      return HttpReply::Error({409, "invalid_request_error", std::move(message), std::move(param), "conflict"});
    case StatusCode::kUnavailable:
      return HttpReply::Error({503, "server_error", std::move(message), "", "unavailable"});
    case StatusCode::kCorruption:  // e.g. the model produced NaN: the server's fault, not a conflict
      return HttpReply::Error({500, "server_error", std::move(message), "", "model_fault"});
    default:
      return HttpReply::Error({500, "server_error", std::move(message), "", ""});
  }
}

}  // namespace fak::internal

#endif  // FAK_SRC_SERVER_HTTP_REPLY_H_
