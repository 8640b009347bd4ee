package handlers

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (s *Server) createUser(c *gin.Context) {
	var in credentials
	if err := decodeJSON(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	user, err := s.accounts.SignUp(c.Request.Context(), in.Email, in.Password)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"id": user.ID, "email": user.Email})
}

func (s *Server) createToken(c *gin.Context) {
	var in credentials
	if err := decodeJSON(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	user, err := s.accounts.LogIn(c.Request.Context(), in.Email, in.Password, c.ClientIP())
	if err != nil {
		s.fail(c, err)
		return
	}
	expires := s.deps.Now().UTC().Add(s.deps.TokenTTL).Truncate(time.Second)
	token, err := s.accounts.IssueToken(c.Request.Context(), user, expires)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, gin.H{"token": token, "token_type": "Bearer", "expires_at": expires})
}
