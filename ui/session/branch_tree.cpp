#include "branch_tree.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QSet>
#include <algorithm>

#include "json_number.h"

namespace gbui {
namespace {

QJsonArray intArray(const QVector<int>& ids) {
  QJsonArray out;
  for (int id : ids) out.append(id);
  return out;
}

QJsonObject nodeJson(const RequestInfo& r, const SessionModel& model, const std::function<quint64(RequestKey)>& id,
                     bool current) {
  QJsonArray tokenIds, texts, probs;
  QString text;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const QString piece = r.tokens.text(i).toString();
    tokenIds.append(r.tokens.tokenId(i));
    texts.append(piece);
    probs.append(static_cast<double>(r.tokens.probBefore(i)));
    text += piece;
  }
  // The token at the fork: the child's own token at fork_position (an edited
  // prompt's first differing token, or the first generated one).
  QJsonValue forkToken = QJsonValue::Null;
  if (r.parent) {
    if (r.forkPosition < r.promptIds.size()) forkToken = r.promptIds[r.forkPosition];
    else if (!r.tokens.empty()) forkToken = r.tokens.tokenId(0);
  }
  const double p = model.forkProbability(r.key);
  return QJsonObject{{"request", static_cast<qint64>(id(r.key))},
                     {"parent", r.parent ? QJsonValue(static_cast<qint64>(id(*r.parent))) : QJsonValue::Null},
                     {"fork_position", r.parent ? r.forkPosition : 0},
                     {"fork_token", forkToken},
                     {"fork_prob", p >= 0.0 ? QJsonValue(p) : QJsonValue::Null},
                     {"prompt_ids", intArray(r.promptIds)},
                     {"token_ids", tokenIds},
                     {"token_texts", texts},
                     {"token_probs", probs},
                     {"text", r.finished && !r.finish.text.isEmpty() ? r.finish.text : text},
                     {"seed", r.seed},
                     {"reason", r.finished ? r.finish.reason : QStringLiteral("running")},
                     {"current", current}};
}

Conversation withKeys(Conversation c, const std::function<RequestKey(RequestKey)>& map) {
  auto remap = [&](QVector<Turn>& turns) {
    for (Turn& t : turns)
      for (RequestKey& k : t.branches) k = map(k);
  };
  remap(c.turns);
  for (ConversationPath& p : c.otherPaths) remap(p.turns);
  return c;
}

}  // namespace

QJsonObject branchTreeToJson(const Conversation& conversation, const SessionModel& model) {
  // Every request of every path, then their fork ancestors.
  QVector<RequestKey> keys;
  auto add = [&](const QVector<Turn>& turns) {
    for (const Turn& t : turns)
      for (RequestKey k : t.branches)
        if (!keys.contains(k)) keys.push_back(k);
  };
  add(conversation.turns);
  for (const ConversationPath& p : conversation.otherPaths) add(p.turns);
  for (qsizetype i = 0; i < keys.size(); ++i)
    if (const RequestInfo* r = model.request(keys[i]); r && r->parent && !keys.contains(*r->parent))
      keys.push_back(*r->parent);
  RequestKey maxLive = 0;
  for (RequestKey k : keys)
    if (!isRestoredKey(k)) maxLive = std::max(maxLive, k);
  const auto id = [maxLive](RequestKey k) -> quint64 { return isRestoredKey(k) ? maxLive + (k & ~kRestoredKeyBit) : k; };

  QSet<RequestKey> shown;
  for (const Turn& t : conversation.turns)
    if (t.currentRequest() != 0) shown.insert(t.currentRequest());
  std::sort(keys.begin(), keys.end(), [&](RequestKey a, RequestKey b) { return id(a) < id(b); });
  QJsonArray nodes;
  for (RequestKey k : keys)
    if (const RequestInfo* r = model.request(k)) nodes.append(nodeJson(*r, model, id, shown.contains(k)));
  return QJsonObject{{"nodes", nodes}, {"conversation", withKeys(conversation, id).toJson()}};
}

RestoredTree branchTreeFromJson(const QJsonObject& tree, const std::function<RequestKey(quint64)>& keyFor) {
  RestoredTree out;
  // Request ids are whole numbers >= 0; anything else in the file names no request.
  const auto id = [](const QJsonValue& v) { return jsonWholeNumber(v, 0, kJsonMaxExactInteger); };
  out.conversation = withKeys(Conversation::fromJson(tree.value("conversation").toObject()),
                              [&](RequestKey k) { return keyFor(k); });
  for (const QJsonValue& v : tree.value("nodes").toArray()) {
    const QJsonObject n = v.toObject();
    const std::optional<qint64> request = id(n.value("request"));
    if (!request) continue;
    RequestInfo r;
    r.key = keyFor(static_cast<quint64>(*request));
    if (const std::optional<qint64> parent = id(n.value("parent"))) r.parent = keyFor(static_cast<quint64>(*parent));
    r.forkPosition = n.value("fork_position").toInt();
    if (n.value("fork_prob").isDouble()) r.savedForkProb = n.value("fork_prob").toDouble();
    for (const QJsonValue& p : n.value("prompt_ids").toArray()) r.promptIds.push_back(p.toInt());
    const QJsonArray ids = n.value("token_ids").toArray(), texts = n.value("token_texts").toArray(),
                     probs = n.value("token_probs").toArray();
    for (qsizetype i = 0; i < ids.size(); ++i) {
      UiToken t;
      t.request = r.key;
      t.index = static_cast<int>(i);
      t.position = static_cast<int>(r.promptIds.size() + i);
      t.tokenId = ids[i].toInt();
      t.text = texts.at(i).toString();
      t.prob = t.probBefore = static_cast<float>(probs.at(i).toDouble());
      r.tokens.pushCompact(t);  // nothing to trim later: a restored token has no candidates
    }
    r.seed = jsonWholeNumber(n.value("seed"), 0, kJsonMaxExactInteger).value_or(-1);
    r.finished = true;
    r.finish.request = r.key;
    r.finish.reason = n.value("reason").toString();
    r.finish.text = n.value("text").toString();
    r.finish.numGenerated = static_cast<int>(r.tokens.size());
    r.finish.numPromptTokens = static_cast<int>(r.promptIds.size());
    out.requests.push_back(std::move(r));
  }
  return out;
}

}  // namespace gbui
