#include "conversation.h"

#include <QJsonArray>

namespace gbui {

QVector<UiChatMessage> Conversation::messagesBefore(int end) const {
  QVector<UiChatMessage> out;
  if (!systemPrompt.isEmpty() && !completionMode) out.push_back({QStringLiteral("system"), systemPrompt});
  for (int i = 0; i < end && i < turns.size(); ++i) out.push_back({turns[i].role, turns[i].text});
  return out;
}

QVector<RequestKey> Conversation::requestsOfPath() const {
  QVector<RequestKey> out;
  for (const Turn& t : turns)
    if (t.currentRequest() != 0) out.push_back(t.currentRequest());
  for (const Turn& t : turns)
    for (RequestKey k : t.branches)
      if (!out.contains(k)) out.push_back(k);
  return out;
}

int Conversation::editMessage(int turn, const QString& text) {
  const bool system = turn < 0;
  const int user = system ? 0 : turn;
  if (user >= turns.size() || turns[user].role != QLatin1String("user")) return -1;
  otherPaths.push_back({systemPrompt, turns});
  turns.resize(user + 1);
  if (system) systemPrompt = text;
  else turns[user].text = text;
  turns.push_back({QStringLiteral("assistant"), QString(), {}, 0});
  return static_cast<int>(turns.size()) - 1;
}

bool Conversation::showRequest(RequestKey request) {
  auto select = [request](QVector<Turn>& path) {
    for (Turn& t : path)
      if (const qsizetype at = t.branches.indexOf(request); at >= 0) {
        t.current = static_cast<int>(at);
        return true;
      }
    return false;
  };
  if (select(turns)) return true;
  for (qsizetype i = 0; i < otherPaths.size(); ++i) {
    if (!select(otherPaths[i].turns)) continue;
    std::swap(systemPrompt, otherPaths[i].systemPrompt);
    std::swap(turns, otherPaths[i].turns);
    return true;
  }
  return false;
}

namespace {

QJsonArray turnsToJson(const QVector<Turn>& turns) {
  QJsonArray turnArray;
  for (const Turn& t : turns) {
    QJsonArray branches;
    for (RequestKey k : t.branches) branches.append(QString::number(k));
    turnArray.append(QJsonObject{{"role", t.role}, {"text", t.text}, {"branches", branches}, {"current", t.current}});
  }
  return turnArray;
}

QVector<Turn> turnsFromJson(const QJsonArray& array) {
  QVector<Turn> turns;
  for (const QJsonValue& v : array) {
    const QJsonObject o = v.toObject();
    Turn t;
    t.role = o.value("role").toString();
    t.text = o.value("text").toString();
    for (const QJsonValue& b : o.value("branches").toArray()) t.branches.push_back(b.toString().toULongLong());
    t.current = std::clamp(o.value("current").toInt(), 0, std::max(0, static_cast<int>(t.branches.size()) - 1));
    turns.push_back(t);
  }
  return turns;
}

}  // namespace

QJsonObject Conversation::toJson() const {
  QJsonObject out{{"system", systemPrompt}, {"turns", turnsToJson(turns)}, {"completion", completionMode}, {"format", format}};
  QJsonArray paths;
  for (const ConversationPath& p : otherPaths) paths.append(QJsonObject{{"system", p.systemPrompt}, {"turns", turnsToJson(p.turns)}});
  if (!paths.isEmpty()) out.insert("other_paths", paths);
  return out;
}

Conversation Conversation::fromJson(const QJsonObject& json) {
  Conversation c;
  c.systemPrompt = json.value("system").toString();
  c.completionMode = json.value("completion").toBool();
  c.format = json.value("format").toString(QStringLiteral("model"));
  c.turns = turnsFromJson(json.value("turns").toArray());
  for (const QJsonValue& v : json.value("other_paths").toArray())
    c.otherPaths.push_back({v.toObject().value("system").toString(), turnsFromJson(v.toObject().value("turns").toArray())});
  return c;
}

}  // namespace gbui
