#include "conversation.h"

#include <QJsonArray>

namespace gbui {

QVector<UiChatMessage> Conversation::messagesBefore(int end) const {
  QVector<UiChatMessage> out;
  if (!systemPrompt.isEmpty() && !completionMode) out.push_back({QStringLiteral("system"), systemPrompt});
  for (int i = 0; i < end && i < turns.size(); ++i) out.push_back({turns[i].role, turns[i].text});
  return out;
}

QJsonObject Conversation::toJson() const {
  QJsonArray turnArray;
  for (const Turn& t : turns) {
    QJsonArray branches;
    for (RequestKey k : t.branches) branches.append(QString::number(k));
    turnArray.append(QJsonObject{{"role", t.role}, {"text", t.text}, {"branches", branches}, {"current", t.current}});
  }
  return QJsonObject{{"system", systemPrompt},
                     {"turns", turnArray},
                     {"completion", completionMode},
                     {"format", format}};
}

Conversation Conversation::fromJson(const QJsonObject& json) {
  Conversation c;
  c.systemPrompt = json.value("system").toString();
  c.completionMode = json.value("completion").toBool();
  c.format = json.value("format").toString(QStringLiteral("model"));
  for (const QJsonValue& v : json.value("turns").toArray()) {
    const QJsonObject o = v.toObject();
    Turn t;
    t.role = o.value("role").toString();
    t.text = o.value("text").toString();
    for (const QJsonValue& b : o.value("branches").toArray()) t.branches.push_back(b.toString().toULongLong());
    t.current = std::clamp(o.value("current").toInt(), 0, std::max(0, static_cast<int>(t.branches.size()) - 1));
    c.turns.push_back(t);
  }
  return c;
}

}  // namespace gbui
